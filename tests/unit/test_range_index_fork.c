/* SPDX-License-Identifier: MIT */
/*
 * The sorted index of peer ranges (src/guard/range_index.h) in a forked child: a thread of the
 * parent that made its range's slot live and had not put it in the index yet when another thread
 * forked is not in the child, and the child's index must still hold that range. The thread is
 * held at that point by wrapping the index's insert (linked with --wrap), so the case is made,
 * not waited for.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mapping_table.h"
#include "range_index.h"
#include "tap.h"

void __real_p2pg_range_index_insert(const struct p2pg_range_entry *e);

static sem_t at_insert, go_on;
static _Atomic int hold_next;

void __wrap_p2pg_range_index_insert(const struct p2pg_range_entry *e);
void __wrap_p2pg_range_index_insert(const struct p2pg_range_entry *e)
{
	if (atomic_exchange(&hold_next, 0)) {
		sem_post(&at_insert);
		sem_wait(&go_on);
	}
	__real_p2pg_range_index_insert(e);
}

static void *adder(void *arg)
{
	(void)arg;
	struct p2pg_map_range r = {.base = 0x200000, .size = 0x100000, .owner = 1, .refs = 1};
	p2pg_map_ranges_add(&r);
	return NULL;
}

int main(void)
{
	/* One range in the index first, so that the span test alone does not answer. */
	struct p2pg_map_range first = {.base = 0x100000, .size = 0x1000, .refs = 1};
	p2pg_map_ranges_add(&first);
	sem_init(&at_insert, 0, 0);
	sem_init(&go_on, 0, 0);
	atomic_store(&hold_next, 1);
	pthread_t t;
	pthread_create(&t, NULL, adder, NULL);
	struct timespec limit;
	clock_gettime(CLOCK_REALTIME, &limit);
	limit.tv_sec += 10;
	if (sem_timedwait(&at_insert, &limit) != 0) {
		CHECK(0, "the adding thread was held at the index's insert (is the core linked "
			 "statically, so that --wrap reaches its call?)");
		return TAP_DONE();
	}
	pid_t pid = fork();
	if (pid == 0) {
		p2pg_map_tables_after_fork_child(); /* as the guard's fork handler does */
		struct p2pg_map_range out;
		int found = p2pg_map_ranges_find(0x200010, &out);
		struct p2pg_map_range later = {.base = 0x900000, .size = 0x1000, .refs = 1};
		p2pg_map_ranges_add(&later);
		found += p2pg_map_ranges_find(0x200010, &out);
		_exit(found == 2 ? 0 : 1);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "a child forked while a range was half added finds it, before and after a later add");
	sem_post(&go_on);
	pthread_join(t, NULL);
	struct p2pg_map_range out;
	CHECK(p2pg_map_ranges_find(0x200010, &out) && out.owner == 1,
	      "the parent finds it once its insert is done");
	return TAP_DONE();
}
