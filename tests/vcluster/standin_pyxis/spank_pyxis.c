/*
 * corral TEST stand-in for NVIDIA's pyxis (never shipped, never installed outside the virtual cluster).
 *
 * A real SPANK plugin named "pyxis": SPANK_PLUGIN stamps it with the version of the Slurm headers it
 * is compiled against, so Slurm refuses it ("Incompatible plugin version") unless it was built against
 * the Slurm installed on the node. It adds srun's --container-image option (parsed by srun, forwarded
 * to slurmstepd) and puts the image and its plugstack.conf runtime_path into the task's environment,
 * where the tests read them. It runs no container.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

static char *image;
static char runtime_path[512];

static int take_image(int val, const char *optarg, int remote)
{
    (void)val; (void)remote;
    free(image);
    image = strdup(optarg ? optarg : "");
    return image ? 0 : -1;
}

struct spank_option spank_options[] = {
    { "container-image", "IMAGE", "[corral TEST stand-in for pyxis] record IMAGE in the task environment",
      1, 0, take_image },
    SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    for (int i = 0; i < ac; i++)
        if (strncmp(av[i], "runtime_path=", 13) == 0)
            snprintf(runtime_path, sizeof runtime_path, "%s", av[i] + 13);
    return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac; (void)av;
    if (!image)
        return 0;
    spank_setenv(sp, "CORRAL_TEST_PYXIS_IMAGE", image, 1);
    spank_setenv(sp, "CORRAL_TEST_PYXIS_RUNTIME", runtime_path, 1);
    return 0;
}
