/* SPDX-License-Identifier: MIT */
/* Calls getpid through next_shim: prints whether the shim reached the real getpid via RTLD_NEXT. */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

extern int next_shim_calls;

int main(void)
{
	pid_t via_shim = getpid();
	pid_t real = (pid_t)syscall(SYS_getpid);
	printf("RTLD_NEXT %s (shim calls %d)\n", via_shim == real ? "ok" : "WRONG",
	       next_shim_calls);
	return via_shim == real ? 0 : 1;
}
