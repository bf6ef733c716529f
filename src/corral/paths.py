"""The paths corral owns on a node, in one place (node/ programs are stdlib-only and keep their own
copies of the two config paths they read; tests/unit/test_layers.py checks they agree)."""

LIB = "/usr/local/lib/corral"           # corral's on-node Python programs (node/*.py)
JOBDIRS = f"{LIB}/jobdirs.py"           # per-user directories, safely (the prolog's, and at login: podman's)
SBIN = "/usr/local/sbin"
HEALTH = f"{SBIN}/corral-health"        # Slurm's HealthCheckProgram
PROLOG, EPILOG = f"{SBIN}/corral-prolog", f"{SBIN}/corral-epilog"  # Slurm's Prolog/Epilog
TASK_PROLOG = f"{SBIN}/corral-task-prolog"  # Slurm's TaskProlog: the job environment (render/job_env.py)
ETC = "/etc/corral"                     # corral's state and configs on a node
HEALTH_CONFIG = f"{ETC}/health.json"
JOBHOOKS_CONFIG = f"{ETC}/jobhooks.json"
JOB_ENV = f"{ETC}/job-env"              # KEY=value lines the TaskProlog exports into every task
SLURMCTLD_STATE = "/var/lib/slurm/slurmctld"  # the default of slurm.state_save_location (spec/shared.py)
SLURMD_STATE = f"{ETC}/slurmd-state"    # what slurmd loaded when it started (SPANK plugins, GRES)
CTK_RUNTIME_MARK = f"{ETC}/nvidia-ctk-runtime"
DCGM_FIELDS = f"{ETC}/dcgm-exporter/fields.csv"
MIG_CONFIG = f"{ETC}/mig-parted.json"   # JSON is YAML: nvidia-mig-parted reads it as its config
ADOPT_ACCESS = "/etc/security/corral-adopt.conf"  # pam_access: who may SSH to a compute node without a job
SHARE = "/usr/local/share/corral"
PYXIS_MARK = f"{SHARE}/pyxis-build"     # what pyxis was built from and against
GPU_BURN_DIR = f"{LIB}/gpuburn"         # gpu_burn + compare.ptx (no "-d"/"-l"/"-h" in the path: gpu_burn
                                        # reads those anywhere in an argument as its options)
NCCL_TESTS_DIR = f"{LIB}/nccl-tests"    # all_reduce_perf
GPU_BURN_MARK = f"{SHARE}/gpu-burn-build"      # what gpu-burn was built from and for
NCCL_TESTS_MARK = f"{SHARE}/nccl-tests-build"  # what nccl-tests was built from and against
STAGE_DIR = "/run/corral-stage"         # uploads through sudo (0700, the SSH user's)
BUILD_DIR = "/var/lib/corral-build"     # root's scratch for the workbench venvs (0700 root): never in /tmp or /var/tmp
REBOOT_MARKER = "/run/corral-reboot-pending"
DB_SQL = "/run/corral-slurmdbd.sql"     # the DB user's SQL, 0600, removed at once
POWER_SUSPEND = f"{SBIN}/corral-power-suspend"          # Slurm's SuspendProgram (on the controllers)
POWER_RESUME = f"{SBIN}/corral-power-resume"            # ResumeProgram
POWER_RESUME_FAIL = f"{SBIN}/corral-power-resume-fail"  # ResumeFailProgram
POWER_CONFIG = f"{ETC}/power.json"                      # node -> BMC URL, bounds (no secret)
BMC_CREDENTIALS = f"{ETC}/bmc-credentials"              # user:password, 0600 slurm:slurm
POWER_LOG = "/var/log/slurm/corral-power.log"           # what the programs did (never a credential)
MODULEFILES = f"{SHARE}/modulefiles"    # corral's Lmod modules for what it installed on the node (software:)
