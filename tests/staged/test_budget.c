/* SPDX-License-Identifier: MIT */
/*
 * Staging budgets smaller than one chunk: the rings shrink (fewer, smaller slots) and copies stay
 * exact; the engine never holds more pinned memory than the budget allows. The budget comes from
 * argv[1] in KiB so the suite runs this program with several.
 */
#include "common.h"

int main(int argc, char **argv)
{
	size_t budget = (argc > 1 ? strtoull(argv[1], NULL, 10) : 1024) * T_KIB;
	struct t_env e;
	t_setup(&e);
	p2pg_staged_set_budget(budget);
	struct p2pg_staged_tuning t;
	p2pg_staged_get_tuning(&t);

	const size_t N = 10 * T_MIB + 333;
	unsigned char *pat = malloc(N), *got = malloc(N);
	if (!pat || !got)
		return 1;
	CUdeviceptr src[2], dst[2];
	for (int d = 0; d < 2; d++) {
		src[d] = t_alloc(e.ctx[d], N);
		dst[d] = t_alloc(e.ctx[d], N);
	}
	CUstream s = t_stream(e.ctx[0]);
	for (int round = 0; round < 2; round++) {
		for (int sd = 0; sd < 2; sd++) {
			int dd = !sd;
			t_pattern(pat, N, (uint32_t)(round * 2 + sd + 1));
			t_upload(e.ctx[sd], src[sd], pat, N);
			struct p2pg_staged_copy c = {.dst = dst[dd] + 1,
						     .src = src[sd] + 2,
						     .dst_device = dd,
						     .src_device = sd,
						     .bytes = N - 2,
						     .stream = s,
						     .async = round == 0};
			T_EXPECT(p2pg_staged_copy(&c) == CUDA_SUCCESS, "copy %d->%d", sd, dd);
			T_CU(p2pg_drv.cuStreamSynchronize(s));
			t_download(e.ctx[dd], got, dst[dd] + 1, N - 2);
			size_t at = t_diff(pat + 2, got, N - 2);
			T_EXPECT(at == (size_t)-1, "budget %zu KiB, %d->%d: wrong byte at %zu",
				 budget / T_KIB, sd, dd, at);
		}
	}
	/* Two rings (one per destination); each at least two 4 KiB slots whatever the budget. */
	size_t pinned = p2pg_staged_pinned_bytes();
	size_t floor = (size_t)e.ndev * 8 * T_KIB;
	T_EXPECT(pinned > 0, "rings allocated");
	T_EXPECT(pinned <= (budget > floor ? budget : floor), "pinned %zu bytes within budget %zu",
		 pinned, budget);
	T_EXPECT(budget >= 2 * t.slot_bytes || pinned < 2 * t.slot_bytes,
		 "rings shrank below the configured slot size (pinned %zu)", pinned);
	T_EXPECT(p2pg_staged_set_tuning(&t) == -EBUSY, "tuning frozen once rings exist");
	free(pat);
	free(got);
	return t_result("staged-budget");
}
