from corral.facts.hardware import parse_hardware

# `lscpu -p=SOCKET,CORE,CPU` of a 2-socket, 2-core, 2-thread machine + meminfo
LSCPU = """\
# The following is the parsable format, which can be fed to other
# programs. Each different item in every column has an unique ID
# starting usually from zero.
# Socket,Core,CPU
0,0,0
0,1,1
1,2,2
1,3,3
0,0,4
0,1,5
1,2,6
1,3,7
MemTotal:       1056462592 kB
""".splitlines()


def test_parse_two_sockets_smt():
    hw = parse_hardware(LSCPU)
    assert (hw.cpus, hw.sockets, hw.cores_per_socket, hw.threads_per_core) == (8, 2, 2, 2)
    assert hw.memory_mb == 1056462592 // 1024


def test_parse_nothing_is_none():
    assert parse_hardware([]) is None
    assert parse_hardware(["MemTotal: 100 kB"]) is None
