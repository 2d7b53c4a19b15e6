/* SPDX-License-Identifier: Apache-2.0 */
/* mdwe_exec: runs a command under the restriction systemd's
 * MemoryDenyWriteExecute=yes puts on a unit (systemd.exec(5)), for the JIT
 * hook test (test_jit_hooks.py): a seccomp filter, inherited by every child
 * and kept across execve, that fails with EPERM
 *   - mmap with both PROT_WRITE and PROT_EXEC,
 *   - mprotect and pkey_mprotect adding PROT_EXEC,
 *   - shmat with SHM_EXEC,
 * as systemd installs it where the kernel has no PR_SET_MDWE (Debian 12's
 * systemd 252 always does). Native system calls only (the unit also sets
 * SystemCallArchitectures=native). Built by the test with cc; no libseccomp.
 *
 *   mdwe_exec COMMAND [ARG]...
 *
 * Exit status: that of COMMAND; 77 on an architecture this filter does not
 * know (the test skips), 126/127 when the filter or exec fails. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

#ifndef SHM_EXEC
#define SHM_EXEC 0100000
#endif

/* The low 32 bits of argument i (little-endian: the first word). */
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(__u64))

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mdwe_exec COMMAND [ARG]...\n");
    return 2;
  }
#ifndef NATIVE_ARCH
  fprintf(stderr, "mdwe_exec: unknown architecture\n");
  return 77;
#else
  struct sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 4, 0),           /* -> mmap */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 6, 0),       /* -> exec */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 5, 0),  /* -> exec */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmat, 7, 0),          /* -> shm */
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      /* mmap: PROT_WRITE and PROT_EXEC together */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 6, 5),
      /* mprotect, pkey_mprotect: PROT_EXEC */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_EXEC),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_EXEC, 3, 2),
      /* shmat: SHM_EXEC */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SHM_EXEC, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog fprog = {.len = sizeof prog / sizeof prog[0], .filter = prog};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) != 0) {
    fprintf(stderr, "mdwe_exec: cannot install the filter: %s\n", strerror(errno));
    return 126;
  }
  execvp(argv[1], argv + 1);
  fprintf(stderr, "mdwe_exec: %s: %s\n", argv[1], strerror(errno));
  return 127;
#endif
}
