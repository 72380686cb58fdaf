/* SPDX-License-Identifier: MIT */
/*
 * `p2pguard explain`, many times in one process, for the explain suite's checks that run it on
 * thousands of texts (gate_check.py, paste_check.py): the command's own function, fed each text as
 * its stdin and its stdout caught, so every answer is byte for byte the command's, without a
 * process start per text (which cost those checks minutes of CI, ten times more under the
 * sanitizers).
 *
 * Input, on stdin: records "MODE\nTEXT\0", MODE one of
 *   json        explain --json -
 *   all         explain --all -
 *   json-every  explain --json - with P2PGUARD_RULES set to an empty folder (every built-in rule)
 *   all-every   explain --all -, likewise
 * Output, on stdout: per record "STATUS\nOUTPUT\0", STATUS the command's exit status.
 *   explain_batch EMPTY_DIR < records
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static char *read_record(FILE *in, size_t *ret_len)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getdelim(&line, &cap, '\0', in);
	if (n <= 0) {
		free(line);
		return NULL;
	}
	*ret_len = (size_t)n;
	return line;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: explain_batch EMPTY_DIR < records\n");
		return 2;
	}
	FILE *real_in = stdin, *real_out = stdout;
	size_t len;
	char *record;
	while ((record = read_record(real_in, &len)) != NULL) {
		char *text = strchr(record, '\n');
		if (!text) {
			fprintf(stderr, "explain_batch: a record without its mode line\n");
			return 2;
		}
		*text++ = '\0';
		bool every = strcmp(record, "json-every") == 0 || strcmp(record, "all-every") == 0;
		bool json = strncmp(record, "json", 4) == 0;
		if (every)
			setenv("P2PGUARD_RULES", argv[1], 1);
		else
			unsetenv("P2PGUARD_RULES");
		char *answer = NULL;
		size_t answer_len = 0;
		stdin = fmemopen(text, strlen(text), "r");
		stdout = open_memstream(&answer, &answer_len);
		if (!stdin || !stdout) {
			fprintf(stderr, "explain_batch: out of memory\n");
			return 2;
		}
		char *args[] = {"explain", json ? "--json" : "--all", "-", NULL};
		int status = p2pg_cmd_explain(3, args);
		fclose(stdout);
		fclose(stdin);
		stdin = real_in;
		stdout = real_out;
		fprintf(real_out, "%d\n", status);
		fwrite(answer, 1, answer_len, real_out);
		fputc('\0', real_out);
		free(answer);
		free(record);
	}
	return fflush(real_out) == 0 ? 0 : 1;
}
