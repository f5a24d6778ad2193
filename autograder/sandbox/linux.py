"""The kernel's constants the sandbox passes to unshare(2), prctl(2), mount(2) and umount2(2),
named once for every side: the grader, the launcher and the driver (this file is copied beside
them as ``aglinux.py``: child.py, TRUSTED_FILES)."""

# unshare(2) flags
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
# prctl(2) options
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
# mount(2) flags, umount2(2) flag
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
