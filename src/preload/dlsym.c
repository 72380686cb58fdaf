/* SPDX-License-Identifier: MIT */
/*
 * dlsym, interposed: a program that looks up a guarded CUDA function in libcuda or libcudart by
 * name (JAX does, and every runtime looks up cuGetProcAddress_v2 this way) gets the guard's
 * wrapper. Every other lookup returns exactly what glibc would.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "driver.h"
#include "entry.h"

/*
 * dlsym(RTLD_NEXT, name) means "the next definition after the caller", and glibc finds the caller
 * from its own return address. A C wrapper that called the real dlsym would make the guard the
 * caller: an interposing library asking for the next getpid would be handed its own back. So the
 * exported dlsym is a stub: RTLD_NEXT jumps straight into glibc's dlsym with the caller's return
 * address untouched; everything else goes to p2pg_dlsym_impl. A lookup before the guard's
 * constructor (a sanitizer runtime resolving its interceptors, another library's constructor)
 * finds glibc's dlsym first, keeping the arguments, so RTLD_NEXT is exact from the first call.
 */
#if !defined(__x86_64__)
#error "the dlsym stub is written for x86-64; port its stub for this architecture"
#endif

void *p2pg_next_dlsym __attribute__((visibility("hidden")));
void *p2pg_dlsym_impl(void *handle, const char *symbol) __attribute__((visibility("hidden")));
void *p2pg_dlsym_resolve(void) __attribute__((visibility("hidden")));

__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	cmpq $-1, %rdi\n"
	"	jne 1f\n"
	"	movq p2pg_next_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jne 2f\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n" /* the call's stack aligned to 16 */
	"	.cfi_adjust_cfa_offset 8\n"
	"	call p2pg_dlsym_resolve\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	je 1f\n"
	"2:	jmp *%rax\n"
	"1:	jmp p2pg_dlsym_impl\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");

/* Without glibc's dlsym (never found): walk the link maps after the caller's and ask each object,
 * through a handle of its own. */
static void *lookup_next_slow(const void *caller, const char *symbol)
{
	Dl_info info;
	struct link_map *map = NULL;
	if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
		return NULL;
	for (struct link_map *l = map->l_next; l; l = l->l_next) {
		void *h =
		    dlopen(l->l_name && *l->l_name ? l->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		void *fn = p2pg_real_dlsym(h, symbol);
		dlclose(h);
		if (fn)
			return fn;
	}
	return NULL;
}

static bool from_cuda_library(void *fn, enum p2pg_library library)
{
	Dl_info info;
	if (!dladdr(fn, &info) || !info.dli_fname)
		return false;
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	if (library == P2PG_LIB_DRIVER)
		return strncmp(base, "libcuda.so", 10) == 0;
	return strncmp(base, "libcudart.so", 12) == 0;
}

/* Also called by the stub, before the constructor: uninstrumented (P2PG_NO_ASAN in driver.h). */
P2PG_NO_ASAN void *p2pg_dlsym_resolve(void)
{
	void *fn = __atomic_load_n(&p2pg_next_dlsym, __ATOMIC_ACQUIRE);
	if (!fn) {
		fn = p2pg_real_dlsym_function();
		__atomic_store_n(&p2pg_next_dlsym, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

/* Only names of guarded functions (they all start "cu") go on to instrumented code. */
static __attribute__((noinline)) void *guarded(const char *symbol, void *fn)
{
	const struct p2pg_hook *hook = p2pg_hook_by_name(symbol);
	if (!hook || fn == hook->wrapper || !from_cuda_library(fn, hook->library))
		return fn;
	p2pg_remember_real(hook, fn);
	return hook->wrapper;
}

/* The ASan runtime's lookups come here too before it is ready (RTLD_DEFAULT for what RTLD_NEXT did
 * not find): uninstrumented up to the name check. */
P2PG_NO_ASAN void *p2pg_dlsym_impl(void *handle, const char *symbol)
{
	void *fn = handle == RTLD_NEXT ? lookup_next_slow(__builtin_return_address(0), symbol)
				       : p2pg_real_dlsym(handle, symbol);
	if (!fn || symbol[0] != 'c' || symbol[1] != 'u')
		return fn;
	return guarded(symbol, fn);
}
