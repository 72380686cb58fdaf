/* SPDX-License-Identifier: MIT */
/*
 * C backtraces: capture with libunwind, format with dladdr (falling back to the module's ELF symbol
 * table), and a crash-time path that only records "address module base" with async-signal-safe
 * calls, so symbols can be resolved later from the files on disk.
 */
#define UNW_LOCAL_ONLY
#include "backtrace.h"
#include "cleanup.h"
#include "driver.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------- */
/* The module the capture code lives in                                                        */

/* Address range of every PT_LOAD segment of the module holding this file's code:
 * libp2pguard-core.so under the preload, the executable when the core is linked statically into
 * the CLI or a test. And the entry points' module (libp2pguard.so), once said. */
static uintptr_t own_lo, own_hi, entry_lo, entry_hi;
static bool own_is_main;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

struct own_search {
	uintptr_t addr;
	int index;
	/* the module found */
	uintptr_t lo, hi;
	bool is_main;
};

static int own_module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct own_search *search = data;
	int index = search->index++;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	bool contains = false;
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		uintptr_t end = start + ph->p_memsz;
		if (start < lo)
			lo = start;
		if (end > hi)
			hi = end;
		if (search->addr >= start && search->addr < end)
			contains = true;
	}
	if (!contains)
		return 0;
	search->lo = lo;
	search->hi = hi;
	/* dl_iterate_phdr reports the executable first. */
	search->is_main = index == 0;
	return 1;
}

static void own_module_init(void)
{
	struct own_search search = {.addr = (uintptr_t)&own_module_init, .index = 0};
	if (dl_iterate_phdr(own_module_cb, &search)) {
		own_lo = search.lo;
		own_hi = search.hi;
		own_is_main = search.is_main;
	}
}

void p2pg_backtrace_entry_module(const void *addr)
{
	struct own_search search = {.addr = (uintptr_t)addr, .index = 0};
	if (addr && dl_iterate_phdr(own_module_cb, &search) && !search.is_main) {
		entry_lo = search.lo;
		entry_hi = search.hi;
	}
}

/* Computed at load time so that a capture from a signal handler finds it ready (pthread_once and
 * dl_iterate_phdr are not async-signal-safe). libunwind, too, sets its globals up in the process's
 * first unw_init_local, and that set-up is not safe for two threads at once (libunwind issue #1029;
 * ThreadSanitizer saw two copier threads' first failures race in it): it happens here, at load,
 * before the program has threads (about 50 us, once). */
__attribute__((constructor)) static void own_module_ctor(void)
{
	pthread_once(&own_once, own_module_init);
	unw_context_t uc;
	unw_cursor_t cursor;
	if (unw_getcontext(&uc) == 0)
		unw_init_local(&cursor, &uc);
}

static bool in_own_module(uintptr_t ip)
{
	return (ip >= own_lo && ip < own_hi) || (ip >= entry_lo && ip < entry_hi);
}

/*
 * The leading frames are the guard's own (wrapper, recorder, this function) and say nothing about
 * the caller, so they are dropped. Only the leading run: guard frames deeper in the stack mean the
 * guard was re-entered or crashed, which is exactly what a backtrace is for. When the core is
 * linked into an executable, that executable is also where the caller's code lives, so then only
 * this function's own frame is dropped.
 */
__attribute__((noinline)) int p2pg_backtrace_capture(uintptr_t *ips, int max)
{
	if (!ips || max <= 0)
		return 0;
	pthread_once(&own_once, own_module_init);

	unw_context_t uc;
	unw_cursor_t cursor;
	if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0)
		return 0;

	int n = 0, walked = 0;
	bool leading = true;
	do {
		unw_word_t ip;
		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		bool skip = leading && in_own_module(ip) && (walked == 0 || !own_is_main);
		walked++;
		if (skip)
			continue;
		leading = false;
		ips[n++] = (uintptr_t)ip;
		/* A corrupt stack can make unw_step go round in circles: bound the walk. */
	} while (n < max && walked < max + 256 && unw_step(&cursor) > 0);
	return n;
}

/*
 * Not unw_backtrace: its per-thread cache is a thread-local variable of libunwind's, and libunwind
 * comes into the process with the dlopen'd core, so the dynamic linker allocates that variable
 * (malloc) the first time a thread touches it; a crash inside malloc, on a thread that never
 * unwound before, would wait for ever on malloc's own lock. unw_init_local2 and unw_step keep
 * their state in the cursor.
 */
int p2pg_backtrace_signal_safe(void *ucontext, uintptr_t *ips, int max)
{
	unw_cursor_t cursor;
	if (!ucontext || !ips || max <= 0 ||
	    unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) != 0)
		return 0;
	int n = 0;
	do {
		unw_word_t ip;
		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		ips[n++] = (uintptr_t)ip;
		/* A corrupt stack can make unw_step go round in circles: max bounds the walk. */
	} while (n < max && unw_step(&cursor) > 0);
	return n;
}

/* ------------------------------------------------------------------------------------------- */
/* Bounded text output                                                                          */

struct out {
	char *buf;
	size_t len;
	size_t pos;
	bool full;
};

/* Appends a whole line or nothing: a frame cut in half would name the wrong place. */
static void out_line(struct out *o, const char *line, size_t n)
{
	if (o->full || o->len == 0)
		return;
	if (o->pos + n + 1 > o->len) {
		o->full = true;
		return;
	}
	memcpy(o->buf + o->pos, line, n);
	o->pos += n;
	o->buf[o->pos] = '\0';
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* ------------------------------------------------------------------------------------------- */
/* ELF symbol tables of modules on disk                                                         */

struct elf_image {
	char path[PATH_MAX];
	bool tried;
	const unsigned char *map;
	size_t size;
};

static void elf_close(struct elf_image *img)
{
	if (img->map)
		munmap((void *)img->map, img->size);
	img->map = NULL;
	img->size = 0;
	img->tried = false;
	img->path[0] = '\0';
}

/* Maps path read-only, reusing the mapping when consecutive frames are in the same module.
 * Returns true when the file is a native ELF image whose headers lie inside the file. */
static bool elf_open(struct elf_image *img, const char *path)
{
	if (img->tried && strcmp(img->path, path) == 0)
		return img->map != NULL;
	elf_close(img);
	img->tried = true;
	snprintf(img->path, sizeof(img->path), "%s", path);

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	void *map = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size >= sizeof(ElfW(Ehdr)))
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return false;
	img->map = map;
	img->size = (size_t)st.st_size;

	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)img->map;
	bool ok = memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
		  eh->e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) &&
		  eh->e_shentsize == sizeof(ElfW(Shdr)) && eh->e_phentsize == sizeof(ElfW(Phdr)) &&
		  eh->e_shoff <= img->size &&
		  (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= img->size - eh->e_shoff &&
		  eh->e_phoff <= img->size &&
		  (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) <= img->size - eh->e_phoff;
	if (!ok) {
		munmap((void *)img->map, img->size);
		img->map = NULL;
		img->size = 0;
	}
	return img->map != NULL;
}

/*
 * The load bias: what to subtract from a run-time address to get a symbol-table value. base is
 * where the module's first mapping starts (dladdr's dli_fbase, or the offset-0 line of
 * /proc/self/maps). An ET_EXEC image runs at its link addresses; an ET_DYN (shared object or PIE)
 * one is shifted by base minus its first segment's page-aligned address.
 */
static uintptr_t elf_bias(const struct elf_image *img, uintptr_t base)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)img->map;
	if (eh->e_type == ET_EXEC)
		return 0;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(img->map + eh->e_phoff);
	uintptr_t first = UINTPTR_MAX;
	for (int k = 0; k < eh->e_phnum; k++)
		if (ph[k].p_type == PT_LOAD && ph[k].p_vaddr < first)
			first = ph[k].p_vaddr;
	if (first == UINTPTR_MAX)
		first = 0;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	if (page == 0 || page == (uintptr_t)-1)
		page = 4096;
	return base - (first & ~(page - 1));
}

/* Finds the function symbol of one table whose [value, value + size) holds vaddr, preferring
 * global over local/weak for aliases. Returns its name (inside the mapping) or NULL. */
static const char *elf_find_in(const struct elf_image *img, unsigned int type, uintptr_t vaddr,
			       uintptr_t *ret_value, size_t *ret_name_max)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)img->map;
	const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(img->map + eh->e_shoff);
	for (int k = 0; k < eh->e_shnum; k++) {
		if (sh[k].sh_type != type || sh[k].sh_entsize != sizeof(ElfW(Sym)) ||
		    sh[k].sh_link >= eh->e_shnum)
			continue;
		const ElfW(Shdr) *strtab = &sh[sh[k].sh_link];
		if (sh[k].sh_offset > img->size || sh[k].sh_size > img->size - sh[k].sh_offset ||
		    strtab->sh_offset > img->size ||
		    strtab->sh_size > img->size - strtab->sh_offset)
			continue;
		const ElfW(Sym) *syms = (const ElfW(Sym) *)(img->map + sh[k].sh_offset);
		size_t count = sh[k].sh_size / sizeof(ElfW(Sym));
		const ElfW(Sym) *best = NULL;
		for (size_t s = 0; s < count; s++) {
			const ElfW(Sym) *sym = &syms[s];
			int stype = ELF64_ST_TYPE(sym->st_info);
			if (stype != STT_FUNC && stype != STT_GNU_IFUNC)
				continue;
			if (sym->st_shndx == SHN_UNDEF || sym->st_name >= strtab->sh_size)
				continue;
			bool inside = sym->st_size ? vaddr - sym->st_value < sym->st_size
						   : vaddr == sym->st_value;
			if (vaddr < sym->st_value || !inside)
				continue;
			if (!best || sym->st_value > best->st_value ||
			    (sym->st_value == best->st_value &&
			     ELF64_ST_BIND(sym->st_info) == STB_GLOBAL &&
			     ELF64_ST_BIND(best->st_info) != STB_GLOBAL))
				best = sym;
		}
		if (best) {
			*ret_value = best->st_value;
			*ret_name_max = strtab->sh_size - best->st_name;
			return (const char *)img->map + strtab->sh_offset + best->st_name;
		}
	}
	return NULL;
}

/* Resolves addr in the module loaded at base: .symtab first (it also holds static functions),
 * then .dynsym (all a stripped library keeps). Copies the name into name and returns the
 * symbol's run-time address, or 0 when no symbol covers addr. */
static uintptr_t elf_symbolise(struct elf_image *img, uintptr_t base, uintptr_t addr, char *name,
			       size_t name_len)
{
	if (!img->map)
		return 0;
	uintptr_t bias = elf_bias(img, base);
	uintptr_t value = 0;
	size_t max = 0;
	const char *found = elf_find_in(img, SHT_SYMTAB, addr - bias, &value, &max);
	if (!found)
		found = elf_find_in(img, SHT_DYNSYM, addr - bias, &value, &max);
	if (!found)
		return 0;
	size_t n = strnlen(found, max);
	if (n >= name_len)
		n = name_len - 1;
	memcpy(name, found, n);
	name[n] = '\0';
	return value + bias;
}

/*
 * Most frames hold a return address: the call is the byte before it, which can lie in another
 * function when the callee does not return. The interrupted frame of a crash holds the faulting
 * instruction itself, which can be a function's first byte (then ip - 1 is in the padding before
 * it). So ip - 1 is asked first and ip only when nothing covers ip - 1. Returns the symbol's
 * address or 0.
 */
static uintptr_t elf_symbolise_ip(struct elf_image *img, uintptr_t base, uintptr_t ip, char *name,
				  size_t name_len)
{
	uintptr_t symbol = elf_symbolise(img, base, ip - 1, name, name_len);
	return symbol ? symbol : elf_symbolise(img, base, ip, name, name_len);
}

/*
 * C++ names as the program's authors wrote them ("enable_peers(int)", not "_Z12enable_peersi").
 * The C++ runtime's demangler is found at run time: a process with C++ frames has libstdc++ (or
 * libc++, which exports the same function) loaded already; anywhere else (the CLI symbolising a
 * dead process's crash) libstdc++ is opened if it is installed. Never linked, never called from
 * a signal handler (it allocates).
 */
typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn demangler;
static pthread_once_t demangler_once = PTHREAD_ONCE_INIT;

static void find_demangler(void)
{
	demangler = (demangle_fn)p2pg_real_dlsym(RTLD_DEFAULT, "__cxa_demangle");
	if (demangler)
		return;
	void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (lib)
		demangler = (demangle_fn)p2pg_real_dlsym(lib, "__cxa_demangle");
}

/* The demangled name (malloc'd, for free) or NULL: not a C++ name, or no demangler. */
static char *demangle(const char *symbol)
{
	if (!symbol || strncmp(symbol, "_Z", 2) != 0)
		return NULL;
	pthread_once(&demangler_once, find_demangler);
	if (!demangler)
		return NULL;
	int status = -1;
	char *name = demangler(symbol, NULL, NULL, &status);
	if (status != 0) {
		free(name);
		return NULL;
	}
	return name;
}

/* One formatted frame: "#N module+0xOFF symbol+0xOFF", with the parts that are unknown left out. */
static void format_frame(struct out *o, int index, uintptr_t ip, const char *module, uintptr_t base,
			 const char *symbol, long symbol_off)
{
	char line[1024];
	int n;
	_cleanup_free_ char *readable = demangle(symbol);
	if (readable)
		symbol = readable;
	if (!module || !*module)
		n = snprintf(line, sizeof(line), "#%d 0x%lx\n", index, (unsigned long)ip);
	else if (!symbol || !*symbol)
		n = snprintf(line, sizeof(line), "#%d %s+0x%lx\n", index, base_name(module),
			     (unsigned long)(ip - base));
	else
		n = snprintf(line, sizeof(line), "#%d %s+0x%lx %s+0x%lx\n", index,
			     base_name(module), (unsigned long)(ip - base), symbol,
			     (unsigned long)symbol_off);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		/* A very long (C++) name: keep the line, shortened, still ending in a newline. */
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	out_line(o, line, (size_t)n);
}

size_t p2pg_backtrace_format(const uintptr_t *ips, int n, char *buf, size_t len)
{
	struct out o = {.buf = buf, .len = len};
	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
	struct elf_image *img = calloc(1, sizeof(*img));
	for (int k = 0; ips && k < n && !o.full; k++) {
		uintptr_t ip = ips[k];
		Dl_info info;
		struct link_map *map = NULL;
		/* The same order as elf_symbolise_ip: ip - 1 first (return addresses), then ip (the
		 * faulting instruction of a crash), each from the exported symbols (dladdr) and
		 * then from the file's full symbol table. */
		bool found = ip > 1 &&
			     dladdr1((void *)(ip - 1), &info, (void **)&map, RTLD_DL_LINKMAP) &&
			     info.dli_fname;
		if (!found)
			found = ip != 0 &&
				dladdr1((void *)ip, &info, (void **)&map, RTLD_DL_LINKMAP) &&
				info.dli_fname;
		if (!found) {
			format_frame(&o, k, ip, NULL, 0, NULL, 0);
			continue;
		}
		uintptr_t base = (uintptr_t)info.dli_fbase;
		if (info.dli_sname && info.dli_saddr) {
			format_frame(&o, k, ip, info.dli_fname, base, info.dli_sname,
				     (long)(ip - (uintptr_t)info.dli_saddr));
			continue;
		}
		/* The executable's link_map name is empty (dladdr reports argv[0], which may be
		 * relative to another directory). */
		char name[512];
		uintptr_t symbol = 0;
		const char *path =
		    map && map->l_name && map->l_name[0] ? map->l_name : "/proc/self/exe";
		if (img && elf_open(img, path))
			symbol = elf_symbolise_ip(img, base, ip, name, sizeof(name));
		format_frame(&o, k, ip, info.dli_fname, base, symbol ? name : NULL,
			     (long)(ip - symbol));
	}
	if (img) {
		elf_close(img);
		free(img);
	}
	return o.pos;
}

/* ------------------------------------------------------------------------------------------- */
/* Crash time: async-signal-safe "address module base" lines                                   */

/* A writer that only touches buf: no stdio, no malloc. A line that does not fit is rolled back. */
struct sig_out {
	char *buf;
	size_t len;
	size_t pos;
	bool overflow;
};

static void sig_put(struct sig_out *o, char c)
{
	if (o->pos + 1 >= o->len) {
		o->overflow = true;
		return;
	}
	o->buf[o->pos++] = c;
}

static void sig_put_hex(struct sig_out *o, uintptr_t v)
{
	char digits[2 * sizeof(v)];
	int n = 0;
	do {
		digits[n++] = "0123456789abcdef"[v & 0xf];
		v >>= 4;
	} while (v);
	sig_put(o, '0');
	sig_put(o, 'x');
	while (n > 0)
		sig_put(o, digits[--n]);
}

/* One mapping already written out, so later frames in it need not read /proc/self/maps again. */
struct sig_mapping {
	uintptr_t start, end, base;
	size_t path_pos, path_len;
};

#define SIG_MAPPINGS 16

enum maps_field { F_START, F_END, F_PERMS, F_OFFSET, F_DEV, F_INODE, F_GAP, F_PATH };

/* State of the /proc/self/maps scan for one address. */
struct maps_scan {
	uintptr_t ip;
	enum maps_field field;
	uintptr_t start, end, offset, dev, inode;
	/* The last offset-0 mapping of a file: where that module begins. */
	bool have_head;
	uintptr_t head_start, head_dev, head_inode;
	bool matched;
};

/* The fixed fields of a line are read: remember module heads, and if the line holds the address,
 * start its output line. */
static void scan_line_fields(struct maps_scan *s, struct sig_out *o, struct sig_mapping *found)
{
	if (s->offset == 0 && s->inode != 0) {
		s->have_head = true;
		s->head_start = s->start;
		s->head_dev = s->dev;
		s->head_inode = s->inode;
	}
	s->matched = s->ip >= s->start && s->ip < s->end;
	if (!s->matched)
		return;
	found->start = s->start;
	found->end = s->end;
	if (s->inode == 0)
		found->base = s->start; /* anonymous or pseudo mapping: no file to read */
	else if (s->have_head && s->head_dev == s->dev && s->head_inode == s->inode)
		found->base = s->head_start;
	else
		found->base = s->start - s->offset;
	sig_put_hex(o, s->ip);
	sig_put(o, ' ');
	found->path_pos = o->pos;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Feeds one character; returns true when the line holding the address is complete. */
static bool scan_char(struct maps_scan *s, char c, struct sig_out *o, struct sig_mapping *found)
{
	if (c == '\n') {
		if (s->field == F_INODE)
			scan_line_fields(s, o, found);
		if (s->matched) {
			found->path_len = o->pos - found->path_pos;
			if (found->path_len == 0) {
				sig_put(o, '?');
				found->path_len = 1;
			}
			return true;
		}
		s->field = F_START;
		s->start = s->end = s->offset = s->dev = s->inode = 0;
		return false;
	}
	int digit = hex_digit(c);
	switch (s->field) {
	case F_START:
		if (c == '-')
			s->field = F_END;
		else if (digit >= 0)
			s->start = s->start << 4 | (uintptr_t)digit;
		break;
	case F_END:
		if (c == ' ')
			s->field = F_PERMS;
		else if (digit >= 0)
			s->end = s->end << 4 | (uintptr_t)digit;
		break;
	case F_PERMS:
		if (c == ' ')
			s->field = F_OFFSET;
		break;
	case F_OFFSET:
		if (c == ' ')
			s->field = F_DEV;
		else if (digit >= 0)
			s->offset = s->offset << 4 | (uintptr_t)digit;
		break;
	case F_DEV:
		/* "major:minor" in hex; only compared for equality, so pack both halves. */
		if (c == ' ')
			s->field = F_INODE;
		else if (c == ':')
			s->dev = s->dev << 32;
		else if (digit >= 0)
			s->dev = s->dev << 4 | (uintptr_t)digit;
		break;
	case F_INODE:
		if (c == ' ') {
			scan_line_fields(s, o, found);
			s->field = F_GAP;
		} else if (c >= '0' && c <= '9') {
			s->inode = s->inode * 10 + (uintptr_t)(c - '0');
		}
		break;
	case F_GAP:
		if (c == ' ')
			break;
		s->field = F_PATH;
		/* fall through */
	case F_PATH:
		if (s->matched)
			sig_put(o, c);
		break;
	}
	return false;
}

/*
 * Streams /proc/self/maps through a small buffer looking for the mapping that holds ip, writing
 * "0xIP PATH" as it passes; the caller appends the base. The module base is the start of the
 * file's offset-0 mapping (same device and inode), which the listing shows before the module's
 * other mappings. Returns true when found.
 */
static bool sig_find_mapping(struct sig_out *o, uintptr_t ip, struct sig_mapping *found)
{
	int fd;
	do
		fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return false;

	struct maps_scan s = {.ip = ip, .field = F_START};
	char chunk[512];
	bool done = false;
	while (!done) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t k = 0; k < got && !done; k++)
			done = scan_char(&s, chunk[k], o, found);
	}
	/* The last line may lack its newline. */
	if (!done && (s.matched || s.field == F_INODE))
		done = scan_char(&s, '\n', o, found);
	close(fd);
	return done;
}

size_t p2pg_backtrace_raw_signal_safe(const uintptr_t *ips, int n, char *buf, size_t len)
{
	struct sig_out o = {.buf = buf, .len = len};
	struct sig_mapping seen[SIG_MAPPINGS];
	int nseen = 0;
	if (!buf || len == 0)
		return 0;
	for (int k = 0; ips && k < n; k++) {
		uintptr_t ip = ips[k];
		size_t line_start = o.pos;
		const struct sig_mapping *reuse = NULL;
		for (int s = 0; s < nseen; s++)
			if (ip >= seen[s].start && ip < seen[s].end)
				reuse = &seen[s];
		struct sig_mapping found;
		bool have = false;
		if (reuse) {
			found = *reuse;
			sig_put_hex(&o, ip);
			sig_put(&o, ' ');
			size_t from = found.path_pos;
			found.path_pos = o.pos;
			for (size_t c = 0; c < found.path_len; c++)
				sig_put(&o, buf[from + c]);
			have = true;
		} else if (ip != 0) {
			have = sig_find_mapping(&o, ip, &found);
			if (!have)
				o.pos = line_start;
		}
		if (!have) {
			sig_put_hex(&o, ip);
			sig_put(&o, ' ');
			sig_put(&o, '?');
			found.base = 0;
		}
		sig_put(&o, ' ');
		sig_put_hex(&o, have ? found.base : 0);
		sig_put(&o, '\n');
		if (o.overflow) {
			o.pos = line_start;
			break;
		}
		if (have && !reuse && nseen < SIG_MAPPINGS)
			seen[nseen++] = found;
	}
	buf[o.pos] = '\0';
	return o.pos;
}

/* ------------------------------------------------------------------------------------------- */
/* After the fact: symbolising the raw lines                                                   */

size_t p2pg_backtrace_symbolise_raw(const char *raw, char *buf, size_t len)
{
	struct out o = {.buf = buf, .len = len};
	if (!buf || len == 0)
		return 0;
	buf[0] = '\0';
	if (!raw)
		return 0;
	struct elf_image *img = calloc(1, sizeof(*img));
	int index = 0;
	for (const char *line = raw; *line && !o.full;) {
		const char *eol = strchr(line, '\n');
		size_t line_len = eol ? (size_t)(eol - line) : strlen(line);
		const char *next = eol ? eol + 1 : line + line_len;

		/* "0xADDR PATH 0xBASE": the path sits between the first and the last space, so a
		 * path with spaces in it survives. */
		const char *first = memchr(line, ' ', line_len);
		const char *last = NULL;
		for (const char *p = line + line_len; p > line; p--)
			if (p[-1] == ' ') {
				last = p - 1;
				break;
			}
		if (!first || last <= first) {
			line = next;
			continue;
		}
		char *end;
		uintptr_t ip = (uintptr_t)strtoull(line, &end, 16);
		uintptr_t base = (uintptr_t)strtoull(last + 1, NULL, 16);
		if (end != first) {
			line = next;
			continue;
		}
		char path[PATH_MAX];
		size_t path_len = (size_t)(last - first - 1);
		if (path_len >= sizeof(path))
			path_len = sizeof(path) - 1;
		memcpy(path, first + 1, path_len);
		path[path_len] = '\0';

		if (strcmp(path, "?") == 0) {
			format_frame(&o, index++, ip, NULL, 0, NULL, 0);
		} else {
			char name[512];
			uintptr_t symbol = 0;
			/* Pseudo-files ("[vdso]") have no file on disk to read. */
			if (img && path[0] == '/' && elf_open(img, path))
				symbol = elf_symbolise_ip(img, base, ip, name, sizeof(name));
			format_frame(&o, index++, ip, path, base, symbol ? name : NULL,
				     (long)(ip - symbol));
		}
		line = next;
	}
	if (img) {
		elf_close(img);
		free(img);
	}
	return o.pos;
}
