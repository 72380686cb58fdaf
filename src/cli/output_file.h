/* SPDX-License-Identifier: MIT */
/* The file a command writes its output into (trace -o, report --html). */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "safe_path.h"

struct cli_output {
	FILE *f;
	bool replace; /* written beside and renamed over the path when done */
	struct p2pg_new_file file;
};

/*
 * "-" is standard output. An existing path that is not a regular file (a FIFO, /dev/stdout) is
 * written as it is, once its path is checked. Anything else is written into a hidden file beside
 * it and renamed over it when done, so that no link another user planted is followed and no
 * reader sees half a file (safe_path.h). Says why in one line, prefixed with command, and returns
 * -1 when it cannot.
 */
int cli_output_open(struct cli_output *out, const char *path, const char *command);

/* Ends the output: when ok and everything was written, the file takes its name; otherwise it is
 * removed. Returns 0, or -EIO (the caller says so). */
int cli_output_close(struct cli_output *out, bool ok);
