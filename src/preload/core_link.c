/* SPDX-License-Identifier: MIT */
/*
 * The link between the preload and the core. LD_PRELOAD is inherited by every process of a job —
 * shells, compilers, nvidia-smi, data loader workers — so libp2pguard.so is small and links the C
 * library only. The core (policy, staged engine, recorder, diagnosis, with SQLite, jansson and
 * libunwind) is libp2pguard-core.so beside it, loaded at the process's first CUDA entry with
 * RTLD_LOCAL: none of its names, nor its libraries', join the program's scope.
 *
 * The entry points call the core's functions by their names as if linked to them. In the preload
 * those names are the stubs below: each is one indirect jump through a slot filled once, from the
 * core's exports, before p2pg_active is set. A jump leaves every argument register and the return
 * address as the caller made them, so one stub serves any signature. No stub runs before the core
 * started: the entry points reach them only after p2pg_enter() returned true.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "entry.h"
#include "notice.h"
#include "settings.h"

#if !defined(__x86_64__)
#error "the core's stubs are written for x86-64; port their jump for this architecture"
#endif

#define CORE_LIBRARY "libp2pguard-core.so"

/* The core's functions the entry points call (guard.h, P2PG_CORE_API). */
#define CORE_FUNCTIONS(X)               \
	X(p2pg_context_device)          \
	X(p2pg_copy_begin)              \
	X(p2pg_copy_end)                \
	X(p2pg_copy_note_batch_element) \
	X(p2pg_copy_staged)             \
	X(p2pg_current_device)          \
	X(p2pg_mapping_begin)           \
	X(p2pg_mapping_end)             \
	X(p2pg_peer_begin)              \
	X(p2pg_peer_end)

#define SLOT(name) void *p2pg_core_##name __attribute__((visibility("hidden")));
CORE_FUNCTIONS(SLOT)
#undef SLOT

#define STUB(name)                                         \
	__asm__(".text\n"                                  \
		".globl " #name "\n"                       \
		".hidden " #name "\n"                      \
		".type " #name ", @function\n" #name ":\n" \
		"	.cfi_startproc\n"                        \
		"	jmp *p2pg_core_" #name "(%rip)\n"  \
		"	.cfi_endproc\n"                          \
		".size " #name ", .-" #name "\n");
CORE_FUNCTIONS(STUB)
#undef STUB

static const struct {
	const char *name;
	void **slot;
} core_functions[] = {
#define ENTRY(name) {#name, &p2pg_core_##name},
    CORE_FUNCTIONS(ENTRY)
#undef ENTRY
};

__thread int p2pg_depth __attribute__((tls_model("initial-exec")));
int p2pg_active;

/* The core's start and its two other hooks; NULL until the core is loaded. */
static bool (*core_start)(const struct p2pg_guard_start *);
static void (*core_driver_initialising)(void);
static void (*core_driver_initialised)(CUresult);
static void (*core_shutdown)(void);
static pthread_once_t core_once = PTHREAD_ONCE_INIT;

void p2pg_init_early(void)
{
	p2pg_settings_load();
	const struct p2pg_settings *s = p2pg_settings_get();
	/* Staged pairs must not be used by NCCL's own P2P transport either; NCCL reads this at its
	 * initialisation, long after this constructor. */
	if (s->enabled && s->mode == P2PG_MODE_STAGED)
		setenv("NCCL_P2P_DISABLE", "1", 0);
}

/* The core's way to the calling thread's depth (util/reentry.h). */
static int *reentry_depth(void)
{
	return &p2pg_depth;
}

/* The folder of "/.../libp2pguard.so" named in LD_PRELOAD (entries split by ':' or ' ', as the
 * dynamic linker splits them), or NULL. The name the linker loaded, as dladdr would say it. */
static const char *preload_folder(size_t *ret_len)
{
	static const char name[] = "/libp2pguard.so";
	const char *p = p2pg_env_get("LD_PRELOAD");
	while (p && *p) {
		size_t n = 0;
		while (p[n] && p[n] != ':' && p[n] != ' ')
			n++;
		if (p[0] == '/' && n >= sizeof(name) - 1 &&
		    memcmp(p + n - (sizeof(name) - 1), name, sizeof(name) - 1) == 0) {
			*ret_len = n - (sizeof(name) - 1);
			return p;
		}
		p += n + (p[n] != '\0');
	}
	return NULL;
}

bool p2pg_core_path_is(const char *path)
{
	size_t dir_len;
	const char *dir = preload_folder(&dir_len);
	if (!dir || !path)
		return false;
	for (size_t k = 0; k < dir_len; k++)
		if (path[k] != dir[k])
			return false;
	path += dir_len;
	if (*path++ != '/')
		return false;
	for (const char *c = CORE_LIBRARY;; c++, path++) {
		if (*path != *c)
			return false;
		if (!*c)
			return true;
	}
}

int p2pg_core_path(char *buf, size_t len)
{
	/* Without printf, and from LD_PRELOAD where it names this library by its absolute path:
	 * the constructor of every process comes here (nccl_offer.c), and dladdr and printf are
	 * pages of libc that /bin/true would not touch. */
	size_t dir_len;
	const char *dir = preload_folder(&dir_len);
	Dl_info info;
	if (!dir) {
		if (!dladdr((void *)p2pg_core_path, &info) || !info.dli_fname)
			return -1;
		const char *slash = strrchr(info.dli_fname, '/');
		dir = slash ? info.dli_fname : ".";
		dir_len = slash ? (size_t)(slash - info.dli_fname) : 1;
	}
	if (dir_len + 1 + sizeof(CORE_LIBRARY) > len)
		return -1;
	memcpy(buf, dir, dir_len);
	buf[dir_len] = '/';
	memcpy(buf + dir_len + 1, CORE_LIBRARY, sizeof(CORE_LIBRARY));
	return 0;
}

static void load_core(void)
{
	const struct p2pg_settings *s = p2pg_settings_get();
	if (!s->enabled)
		return;
	char path[PATH_MAX];
	if (p2pg_core_path(path, sizeof(path)) < 0) {
		p2pg_notice("cannot find where " CORE_LIBRARY " is; the guard passes every call "
			    "through unrecorded");
		return;
	}
	/* NODELETE: the core's threads and handlers live as long as the process. */
	void *core = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!core) {
		p2pg_notice("cannot load %s; the guard passes every call through unrecorded",
			    dlerror());
		return;
	}
	for (size_t k = 0; k < sizeof(core_functions) / sizeof(core_functions[0]); k++) {
		*core_functions[k].slot = p2pg_real_dlsym(core, core_functions[k].name);
		if (!*core_functions[k].slot) {
			p2pg_notice("%s lacks %s (a core of another version?); the guard passes "
				    "every call through unrecorded",
				    path, core_functions[k].name);
			return;
		}
	}
	core_start =
	    (bool (*)(const struct p2pg_guard_start *))p2pg_real_dlsym(core, "p2pg_guard_start");
	core_driver_initialising =
	    (void (*)(void))p2pg_real_dlsym(core, "p2pg_guard_driver_initialising");
	core_driver_initialised =
	    (void (*)(CUresult))p2pg_real_dlsym(core, "p2pg_guard_driver_initialised");
	core_shutdown = (void (*)(void))p2pg_real_dlsym(core, "p2pg_guard_shutdown");
	if (!core_start || !core_driver_initialising || !core_driver_initialised ||
	    !core_shutdown) {
		p2pg_notice("%s is not the guard's core; the guard passes every call through "
			    "unrecorded",
			    path);
		core_driver_initialising = NULL;
		core_driver_initialised = NULL;
		core_shutdown = NULL;
		return;
	}
	/* The slots are written above, before this release store: an entry point that sees
	 * p2pg_active set (acquire) sees them filled. */
	struct p2pg_guard_start start = {
	    .settings = s, .reentry_depth = reentry_depth, .entry_points = (void *)load_core};
	if (core_start(&start))
		__atomic_store_n(&p2pg_active, 1, __ATOMIC_RELEASE);
}

bool p2pg_init_slow(void)
{
	pthread_once(&core_once, load_core);
	return __atomic_load_n(&p2pg_active, __ATOMIC_ACQUIRE);
}

void p2pg_core_driver_initialising(void)
{
	if (__atomic_load_n(&p2pg_active, __ATOMIC_ACQUIRE))
		core_driver_initialising();
}

void p2pg_core_driver_initialised(CUresult status)
{
	if (__atomic_load_n(&p2pg_active, __ATOMIC_ACQUIRE))
		core_driver_initialised(status);
}

void p2pg_core_shutdown(void)
{
	if (__atomic_load_n(&p2pg_active, __ATOMIC_ACQUIRE))
		core_shutdown();
}
