/* SPDX-License-Identifier: MIT */
/*
 * A SIGKILL can land inside a fold: the owner's overflow aggregate must still read as a whole
 * number of calls (every call's bytes and host time with its count, or none of them), since
 * `p2pguard recover` imports the aggregate as the dead process left it.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spool.h"
#include "spool_ring.h"
#include "tap.h"

enum { KILLS = 400, BYTES = 256, HOST_NS = 1000 };

static _Noreturn void fold_forever(struct p2pg_spool_thread *t)
{
	struct p2pg_record r = {.host_ns = HOST_NS,
				.bytes = BYTES,
				.api = 5,
				.kind = P2PG_REC_TRANSFER,
				.path = P2PG_PATH_P2P,
				.src_device = 0,
				.dst_device = 1};
	for (;;)
		p2pg_spool_fold(t, &r);
}

int main(void)
{
	struct p2pg_spool_thread *t =
	    mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(t != MAP_FAILED, "a shared ring");
	if (t == MAP_FAILED)
		return TAP_DONE();
	srand(1);
	int torn = 0, folded_wrong = 0, cut_in_fold = 0;
	for (int k = 0; k < KILLS; k++) {
		memset(t->agg, 0, sizeof(t->agg));
		atomic_store(&t->folded, 0);
		pid_t child = fork();
		if (child == 0)
			fold_forever(t);
		/* 0-500 us into the flood: the child is folding, wherever the kill lands. */
		struct timespec pause = {0, 20000 + (rand() % 480) * 1000};
		nanosleep(&pause, NULL);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		struct p2pg_spool_totals sum = {0};
		for (int a = 0; a < P2PG_SPOOL_AGGS; a++) {
			struct p2pg_spool_totals one;
			if (atomic_load(&t->agg[a].used) && p2pg_spool_agg_read(&t->agg[a], &one)) {
				sum.count += one.count;
				sum.bytes += one.bytes;
				sum.host_ns += one.host_ns;
			}
		}
		if (sum.bytes != sum.count * BYTES || sum.host_ns != sum.count * HOST_NS)
			torn++;
		uint64_t folded = atomic_load(&t->folded);
		if (folded + 1 == sum.count)
			cut_in_fold++;
		else if (folded != sum.count)
			folded_wrong++;
	}
	CHECK(torn == 0,
	      "%d SIGKILLs during folds: the aggregate read back is a whole number of calls "
	      "(%d torn)",
	      KILLS, torn);
	/* The folded counter comes after the aggregate: a kill between them leaves it one behind,
	 * never ahead (it tells the importer that the aggregates changed; a new importer reads them
	 * whatever it says). */
	CHECK(folded_wrong == 0,
	      "the folded counter is the aggregates' count or one behind it (%d one behind)",
	      cut_in_fold);
	return TAP_DONE();
}
