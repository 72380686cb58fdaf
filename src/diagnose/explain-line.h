/* SPDX-License-Identifier: MIT */
/*
 * What a line pasted into `p2pguard explain` names: the CUDA statuses (by name, message or number),
 * the CUDA calls, the source files and the frameworks that printed it. Read once per line and
 * compared with each rule's codes and "context" (rules/README.md, "Explain").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define LINE_STATUSES_MAX 16
#define LINE_NAMES_MAX	  8
#define LINE_NAME_LEN	  64

/* The frameworks a line can come from; bit k of line_clues.frameworks is framework k. */
enum framework {
	FW_NCCL,
	FW_PYTORCH,
	FW_VLLM,
	FW_SGLANG,
	FW_TENSORRT_LLM,
	FW_JAX,
	FW_TENSORFLOW,
	FW_CUPY,
	FW_PYCUDA,
	FW_CUDA_SAMPLES,
	FW_NVBANDWIDTH,
	FW_NCCL_TESTS,
	FW_TRITON,
	FW_FABRIC_MANAGER,
	FW_WSL,
	FW_NVSHMEM,
	FW_MSCCLPP,
	FW_DEEPEP,
	FW_PADDLE,
	FW_MXNET,
	FW_CUTORCH,
	FW_CAFFE2,
	FW_FLASHINFER,
	FW_TRANSFORMER_ENGINE,
	FW_UCX,
	FW_GDR,
	FW_COUNT,
};
_Static_assert(FW_COUNT <= 32, "line_clues.frameworks holds one bit per framework");

struct line_clues {
	int statuses[LINE_STATUSES_MAX]; /* every status named, in no order, without repeats */
	size_t spans[LINE_STATUSES_MAX]; /* how much of the line names it: its longest spelling */
	size_t n_statuses;
	char apis[LINE_NAMES_MAX][LINE_NAME_LEN]; /* cuFoo / cudaFoo as written, suffix kept */
	bool api_in_words[LINE_NAMES_MAX];	  /* named by a library's phrase, not identifier */
	size_t n_apis;
	char files[LINE_NAMES_MAX][LINE_NAME_LEN]; /* source files' names, without folders */
	size_t n_files;
	unsigned frameworks;
};

/* Reads what text names into *ret. Never fails: a line that names nothing gives empty lists. */
void explain_line_read(const char *text, struct line_clues *ret);

/* Adds the calls, source files and frameworks text names to *c (not its statuses). */
void explain_line_add_surroundings(struct line_clues *c, const char *text);

bool line_names_status(const struct line_clues *c, int status);
/* The length of the longest spelling of status in the line (name, message or digits); 0 when the
 * line does not name it. */
size_t line_status_span(const struct line_clues *c, int status);
/* api is a rule's plain name (cuMemcpyPeer); the line may carry the ABI suffix (_v2, _ptsz).
 * *in_words (when not NULL) tells whether the line names it only in a library's words ("failed to
 * open ipc mem handle"). */
bool line_names_api(const struct line_clues *c, const char *api, bool *in_words);
bool line_names_file(const struct line_clues *c, const char *file);

/* The framework called name (the values rules may write in context.framework), or -1. */
int explain_framework_lookup(const char *name);
/* "nccl, pytorch, ...": every name, for the validator's message. */
const char *explain_framework_names(void);

/* True when file is a name explain can find in a line: letters, digits, '_', '-', '.', and an
 * extension of a source file (.c .cc .cpp .cu .cuh .h .hpp .py .pyx). */
bool explain_valid_file_name(const char *file);
