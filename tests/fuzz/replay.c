/* SPDX-License-Identifier: MIT */
/* The fuzz targets without libFuzzer: runs each file named (or each file in each folder named) once
 * through LLVMFuzzerTestOneInput, so that the seeds and every crasher ever found stay a test of
 * the ordinary builds (gcc, the ASan pass). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	size_t cap = 1 << 16, len = 0;
	uint8_t *data = malloc(cap);
	size_t n;
	while (data && (n = fread(data + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *bigger = realloc(data, cap * 2);
			if (!bigger) {
				free(data);
				data = NULL;
				break;
			}
			data = bigger;
			cap *= 2;
		}
	}
	fclose(f);
	if (!data)
		return 1;
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	printf("ok %s\n", path);
	return 0;
}

int main(int argc, char **argv)
{
	int failed = 0, ran = 0;
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int k = 1; k < argc; k++) {
		struct stat st;
		if (stat(argv[k], &st) < 0) {
			perror(argv[k]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed += run_file(argv[k]);
			ran++;
			continue;
		}
		struct dirent **names;
		int count = scandir(argv[k], &names, NULL, alphasort);
		for (int e = 0; e < count; e++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[k], names[e]->d_name);
			if (names[e]->d_name[0] != '.' && stat(path, &st) == 0 &&
			    S_ISREG(st.st_mode)) {
				failed += run_file(path);
				ran++;
			}
			free(names[e]);
		}
		free(names);
	}
	printf("%d inputs, %d unreadable\n", ran, failed);
	return failed ? 1 : 0;
}
