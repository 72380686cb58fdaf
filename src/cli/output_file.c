/* SPDX-License-Identifier: MIT */
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_output_open(struct cli_output *out, const char *path, const char *command)
{
	char why[256];
	*out = (struct cli_output){0};
	if (strcmp(path, "-") == 0) {
		out->f = stdout;
		return 0;
	}
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (p2pg_path_check(path, false, why, sizeof(why)) < 0) {
			fprintf(stderr, "p2pguard %s: cannot write %s: %s\n", command, path, why);
			return -1;
		}
		out->f = fopen(path, "we");
		if (!out->f) {
			fprintf(stderr, "p2pguard %s: cannot write %s: %s\n", command, path,
				strerror(errno));
			return -1;
		}
		return 0;
	}
	int fd = p2pg_new_file_open(&out->file, path, why, sizeof(why));
	if (fd < 0) {
		fprintf(stderr, "p2pguard %s: cannot write %s: %s\n", command, path, why);
		return -1;
	}
	out->f = fdopen(fd, "w");
	if (!out->f) {
		fprintf(stderr, "p2pguard %s: cannot write %s: %s\n", command, path,
			strerror(errno));
		p2pg_new_file_abandon(&out->file);
		close(fd);
		return -1;
	}
	out->replace = true;
	return 0;
}

int cli_output_close(struct cli_output *out, bool ok)
{
	if (out->f == stdout)
		return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -EIO;
	ok = ok && fflush(out->f) == 0 && !ferror(out->f);
	if (out->replace) {
		char why[256];
		if (ok)
			ok = p2pg_new_file_commit(&out->file, why, sizeof(why)) == 0;
		else
			p2pg_new_file_abandon(&out->file);
	}
	if (fclose(out->f) != 0)
		ok = false;
	return ok ? 0 : -EIO;
}
