/* SPDX-License-Identifier: MIT */
/* Folders of rules: recursion, the id/path check, broken files skipped while the others load,
 * duplicates across files, and what is not a rule file. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "p2pguard/rules.h"
#include "rules-test.h"

static char root[256], second[256];

static const char *entry(const char *id)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf),
		 "{\n  \"id\": \"%s\",\n  \"signature\": \"s\",\n  \"root_cause\": \"r\",\n"
		 "  \"match\": {\"status\": [217]},\n  \"workarounds\": [{\"action\": \"a\", "
		 "\"success_rate\": 0.5}],\n  \"examples\": {\"matches\": [{}], \"near_misses\": "
		 "[{}]}\n}\n",
		 id);
	return buf;
}

static void put_in(const char *base, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", base, rel);
	/* Create the parent folders. */
	for (char *p = path + strlen(base) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	check(fd >= 0);
	if (fd >= 0) {
		check(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
		close(fd);
	}
}

static void put(const char *rel, const char *text)
{
	put_in(root, rel, text);
}

struct all {
	int n;
	int lines[16];
	char files[16][512];
	char messages[16][256];
};

static void capture_all(void *userdata, const char *file, int line, const char *message)
{
	struct all *a = userdata;
	fprintf(stderr, "  (reported %s:%d: %s)\n", file, line, message);
	if (a->n < 16) {
		a->lines[a->n] = line;
		snprintf(a->files[a->n], sizeof(a->files[0]), "%s", file);
		snprintf(a->messages[a->n], sizeof(a->messages[0]), "%s", message);
	}
	a->n++;
}

static void test_tree(void)
{
	char want[512];
	struct all all = {0};
	struct p2pg_ruleset *rs = p2pg_ruleset_new();

	put("cuda/good-one.json", entry("cuda/good-one"));
	put("cuda/deeper/good-two.json", entry("cuda/deeper/good-two"));
	put("nccl/misplaced.json", entry("nccl/elsewhere"));
	put("nccl/broken.json", "{\n  \"id\": \"nccl/broken\",\n  oops\n}\n");
	put_in(second, "cuda/good-one.json", entry("cuda/good-one"));
	put_in(second, "cuda/another.json", entry("cuda/another"));
	put("notes.txt", "not a rule");
	put(".hidden/ignored.json", "not even JSON");
	put("cuda/.editor-backup.json", "not even JSON");

	/* A trailing slash does not change the names in messages. */
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/", root);
	int r = p2pg_ruleset_load_dir(rs, dir, capture_all, &all);
	check_int(r, 2);
	check_int(all.n, 2);
	check_int(p2pg_ruleset_count(rs), 2);
	check(p2pg_ruleset_find(rs, "cuda/good-one") != NULL);
	check(p2pg_ruleset_find(rs, "cuda/deeper/good-two") != NULL);
	snprintf(want, sizeof(want), "%s/cuda/good-one.json", root);
	check_str(p2pg_rule_source_file(p2pg_ruleset_find(rs, "cuda/good-one")), want);

	/* Files are read in name order: broken, then misplaced. */
	snprintf(want, sizeof(want), "%s/nccl/broken.json", root);
	check_str(all.files[0], want);
	check_int(all.lines[0], 3);
	check_str(all.messages[0], "syntax error: string or '}' expected near 'oops'");
	snprintf(want, sizeof(want), "%s/nccl/misplaced.json", root);
	check_str(all.files[1], want);
	check_int(all.lines[1], 2);
	check_str(
	    all.messages[1],
	    "id \"nccl/elsewhere\" does not match the file path (expected \"nccl/misplaced\")");

	/* A second folder: its rule with a taken id is refused, the other one loads. */
	struct all more = {0};
	check_int(p2pg_ruleset_load_dir(rs, second, capture_all, &more), 1);
	check_int(more.n, 1);
	snprintf(want, sizeof(want), "%s/cuda/good-one.json", second);
	check_str(more.files[0], want);
	check_int(more.lines[0], 2);
	snprintf(want, sizeof(want),
		 "duplicate id \"cuda/good-one\" (also in %s/cuda/good-one.json)", root);
	check_str(more.messages[0], want);
	check_int(p2pg_ruleset_count(rs), 3);
	p2pg_ruleset_free(rs);
}

/* Links: "x -> ." four times made 4^16 folder visits (a job hanging past 60 s), two made 131,072
 * lines. Each folder is read once: a link back to one already read is one problem, and a link to
 * a folder outside is read like any folder. */
static void test_link_loops(void)
{
	char loops[300], path[400], outside[300];
	snprintf(loops, sizeof(loops), "%s/loops", root);
	snprintf(outside, sizeof(outside), "%s/outside", root);
	mkdir(loops, 0755);
	mkdir(outside, 0755);
	put_in(loops, "cuda/one.json", entry("cuda/one"));
	put_in(outside, "far.json", entry("there/far"));
	for (int k = 0; k < 4; k++) {
		snprintf(path, sizeof(path), "%s/x%d", loops, k);
		check(symlink(".", path) == 0);
	}
	snprintf(path, sizeof(path), "%s/cuda/up", loops);
	check(symlink("..", path) == 0);
	snprintf(path, sizeof(path), "%s/there", loops);
	check(symlink(outside, path) == 0);
	snprintf(path, sizeof(path), "%s/there-again", loops);
	check(symlink(outside, path) == 0);

	struct all all = {0};
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = p2pg_ruleset_load_dir(rs, loops, capture_all, &all);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* x0..x3 and cuda/up lead back, there-again to a folder read already. */
	check_int(r, 6);
	check_int(all.n, 6);
	check_int(p2pg_ruleset_count(rs), 2);
	check(p2pg_ruleset_find(rs, "cuda/one") != NULL);
	check(p2pg_ruleset_find(rs, "there/far") != NULL);
	snprintf(path, sizeof(path), "%s/cuda/up", loops);
	check_str(all.files[0], path);
	check_str(all.messages[0],
		  "a folder already read (a link loop, or a second link to it): not read again");
	check(t1.tv_sec - t0.tv_sec < 2);
	p2pg_ruleset_free(rs);

	/* A wide tree of real folders: read up to the bound, then one line. */
	char wide[300];
	snprintf(wide, sizeof(wide), "%s/wide", root);
	mkdir(wide, 0755);
	for (int k = 0; k < 1100; k++) {
		snprintf(path, sizeof(path), "%s/d%04d", wide, k);
		mkdir(path, 0755);
	}
	struct all many = {0};
	rs = p2pg_ruleset_new();
	check_int(p2pg_ruleset_load_dir(rs, wide, capture_all, &many), 1);
	check_int(many.n, 1);
	check_str(many.messages[0], "more than 1024 folders: the rest is not read");
	p2pg_ruleset_free(rs);
}

static void test_missing_dir(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/does-not-exist", root);
	check_int(p2pg_ruleset_load_dir(rs, dir, NULL, NULL), -ENOENT);
	check_int(p2pg_ruleset_load_dir(rs, "", NULL, NULL), -EINVAL);
	check_int(p2pg_ruleset_load_dir(NULL, root, NULL, NULL), -EINVAL);
	p2pg_ruleset_free(rs);
}

static int remove_tree(const char *path)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	return system(cmd);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(root, sizeof(root), "%s/p2pg-rules-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	snprintf(second, sizeof(second), "%s/p2pg-rules-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root) || !mkdtemp(second)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_tree);
	RUN(test_link_loops);
	RUN(test_missing_dir);
	remove_tree(root);
	remove_tree(second);
	return test_failures ? 1 : 0;
}
