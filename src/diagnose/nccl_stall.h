/* SPDX-License-Identifier: MIT */
/* The knowledge base's diagnosis of an NCCL operation that never finishes (nccl_stall.c). */
#pragma once

#include <stdbool.h>

/*
 * The rule that fits an NCCL stall: func, the operation (AllReduce, Send, ...); peer_state, where
 * the other ranks were (record/nccl_watch.h). False when none fits. The strings live as long as
 * the process. For the drainer (struct p2pg_recorder_hooks): one thread.
 */
bool p2pg_nccl_stall_diagnosis(const char *rules_dir, const char *func, const char *peer_state,
			       const char **rule_id, const char **root_cause, const char **advice);
