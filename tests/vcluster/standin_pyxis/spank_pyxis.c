/*
 * corral TEST stand-in for NVIDIA's pyxis (never shipped, never installed outside the virtual cluster).
 *
 * A real SPANK plugin named "pyxis": SPANK_PLUGIN stamps it with the version of the Slurm headers it
 * is compiled against, so Slurm refuses it ("Incompatible plugin version") unless it was built against
 * the Slurm installed on the node. It adds srun's --container-image option (parsed by srun, forwarded
 * to slurmstepd) and puts the image and its plugstack.conf runtime_path into the task's environment,
 * where the tests read them. An image that is a squashfs file (an absolute path, as made by `corral
 * images pull`) is handed to enroot as pyxis does (`enroot create --name pyxis_JOB_STEP_TASK FILE`: the
 * stand-in enroot unpacks it with unsquashfs into the user's ENROOT_DATA_PATH); then, in the task, as
 * the user, just before Slurm execs the command, the plugin enters the unpacked root: a new user
 * namespace mapping only the user's own uid and gid, a private mount namespace, chroot. No cgroups,
 * no /proc, /dev or home mounted inside, no entrypoint, no registry import: those are real pyxis' and
 * enroot's. Of enroot's mount configuration it does the bind entries of the .fstab files in /etc/enroot/mounts.d
 * (x-create=file|dir, bind, rbind, ro, nosuid, nodev), as enroot does at start: corral's TaskProlog is bound in there,
 * and Slurm runs it after task_init, inside the container. Cleanup: corral's epilog removes the user's enroot data directory after the last job.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
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

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t len = (ssize_t)strlen(text);
    if (fd < 0)
        return -1;
    if (write(fd, text, len) != len) {
        close(fd);
        return -1;
    }
    return close(fd);
}

static int mkdirs(char *path)  /* mkdir -p, 0755 (inside the user's own unpacked root) */
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static unsigned long kept_flags(const char *path)  /* a remount in a user namespace keeps the locked ones */
{
    struct statvfs st;
    unsigned long f = 0;
    if (statvfs(path, &st) < 0)
        return 0;
    if (st.f_flag & ST_NOSUID) f |= MS_NOSUID;
    if (st.f_flag & ST_NODEV) f |= MS_NODEV;
    if (st.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    if (st.f_flag & ST_NOATIME) f |= MS_NOATIME;
    if (st.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
    if (st.f_flag & ST_RELATIME) f |= MS_RELATIME;
    if (st.f_flag & ST_RDONLY) f |= MS_RDONLY;
    return f;
}

/* enroot's mounts.d: each `SRC DST TYPE OPTIONS` line with `bind` in OPTIONS, bound at ROOTFS/DST. */
static int bind_mounts(const char *rootfs)
{
    glob_t g;
    int rc = 0;
    if (glob("/etc/enroot/mounts.d/*.fstab", 0, NULL, &g) != 0)
        return 0;
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        char line[2048], src[1024], dst[1024], type[64], opts[512], target[8192];
        while (f && rc == 0 && fgets(line, sizeof line, f)) {
            if (sscanf(line, "%1023s %1023s %63s %511s", src, dst, type, opts) != 4 || src[0] == '#'
                || !strstr(opts, "bind"))
                continue;
            snprintf(target, sizeof target, "%s%s", rootfs, dst);
            if (strstr(opts, "x-create=file")) {
                char *slash = strrchr(target, '/');
                int fd;
                *slash = '\0';
                rc = mkdirs(target);
                *slash = '/';
                fd = rc == 0 ? open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
                rc = fd < 0 ? -1 : close(fd);
            } else if (strstr(opts, "x-create=dir")) {
                rc = mkdirs(target);
            }
            if (rc == 0)
                rc = mount(src, target, NULL, MS_BIND | (strstr(opts, "rbind") ? MS_REC : 0), NULL);
            if (rc == 0 && (strstr(opts, ",ro") || !strncmp(opts, "ro", 2)))
                rc = mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(target)
                           | (strstr(opts, "nosuid") ? MS_NOSUID : 0) | (strstr(opts, "nodev") ? MS_NODEV : 0), NULL);
            if (rc < 0)
                fprintf(stderr, "pyxis: %s: cannot mount %s at %s: %s\n", g.gl_pathv[i], src, dst, strerror(errno));
        }
        if (f)
            fclose(f);
    }
    globfree(&g);
    return rc;
}

/* `enroot create --name NAME IMAGE` as the task's user; the stand-in prints the unpacked root. */
static int enroot_create(const char *name, char *rootfs, size_t size)
{
    int fds[2], status;
    ssize_t got = 0, n;
    pid_t pid;
    if (pipe(fds) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execlp("enroot", "enroot", "create", "--name", name, "--", image, (char *)NULL);
        fprintf(stderr, "pyxis: cannot run enroot: %s\n", strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    while (got < (ssize_t)size - 1 && (n = read(fds[0], rootfs + got, size - 1 - got)) > 0)
        got += n;
    close(fds[0]);
    rootfs[got] = '\0';
    rootfs[strcspn(rootfs, "\n")] = '\0';
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return rootfs[0] == '/' ? 0 : -1;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    uint32_t job = 0, step = 0;
    int task = 0;
    char name[128], rootfs[4096], map[64];
    uid_t uid = getuid();
    gid_t gid = getgid();
    (void)ac; (void)av;
    if (!image || image[0] != '/')  /* a registry image: the stand-in imports nothing */
        return 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    spank_get_item(sp, S_TASK_ID, &task);
    snprintf(name, sizeof name, "pyxis_%u_%u_%d", job, step, task);
    if (enroot_create(name, rootfs, sizeof rootfs) < 0) {
        fprintf(stderr, "pyxis: failed to create the container from %s (enroot create failed)\n", image);
        slurm_error("pyxis: failed to create the container from %s", image);
        return -1;
    }
    /* Slurm's setuid to the user left the task non-dumpable: its /proc/self files are root's, and the
     * user could not write its own uid_map. The task is the user's own process, about to exec. */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 || unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
        fprintf(stderr, "pyxis: unshare: %s\n", strerror(errno));
        return -1;
    }
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (write_file("/proc/self/uid_map", map) < 0 || write_file("/proc/self/setgroups", "deny") < 0) {
        fprintf(stderr, "pyxis: uid map: %s\n", strerror(errno));
        return -1;
    }
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    if (write_file("/proc/self/gid_map", map) < 0) {
        fprintf(stderr, "pyxis: gid map: %s\n", strerror(errno));
        return -1;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || bind_mounts(rootfs) < 0 || chroot(rootfs) < 0
        || chdir("/") < 0) {
        fprintf(stderr, "pyxis: cannot enter %s: %s\n", rootfs, strerror(errno));
        return -1;
    }
    return 0;
}
