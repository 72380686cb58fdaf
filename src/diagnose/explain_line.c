/* SPDX-License-Identifier: MIT */
/*
 * What a pasted line names (explain-line.h). The line is free text from any tool, so every reading
 * is conservative: a word is taken for a status, a call or a file only where its spelling leaves
 * no doubt, because a status named in the line rules out every rule about other statuses.
 */
#include "explain-line.h"

#include <ctype.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "driver.h"
#include "rules-private.h"

/* ---- Frameworks ---- */

/* Words only a framework's own messages carry. "CUDART error" is vLLM's CudaRTLibrary wrapper
 * (vllm/distributed/device_communicators/cuda_wrapper.py), which SGLang copied; "LogicError: cu"
 * is how PyCUDA raises a failed driver call. "NVLink SHARP" is NCCL's name for NVLS in its WARN
 * lines (transport/nvls.cc), often pasted without the "NCCL WARN" prefix; "Setup Custom allreduce
 * failed" is SGLang's warning when its custom all-reduce cannot start
 * (sglang/srt/distributed/parallel_state.py); "Test CUDA failure" and "Test NCCL failure" are
 * nccl-tests' own checks (src/common.h). Triton Inference Server is named by its programs and by
 * its wording of CUDA shared memory ("failed to register CUDA shared memory region"), never by
 * "triton" alone, which is also OpenAI's kernel compiler, nor by its install folder
 * (names_triton_server). NVIDIA Fabric Manager's journal lines carry its program name
 * (nv-fabricmanager) or, in its own log file, its multicast team set-up for NVLS ("in the
 * multicast team request setup"). WSL 2 is a platform rather than a framework,
 * but it is named the same way, by words only its users' logs carry (the kernel's
 * "microsoft-standard-WSL2", Docker Desktop, which runs Linux containers inside it), and it decides
 * the same kind of thing: CUDA IPC is not available there. */
static const struct {
	const char *name;
	const char *markers[8];
} frameworks[FW_COUNT] = {
    [FW_NCCL] = {"nccl", {"nccl", "NVLink SHARP", NULL}},
    [FW_PYTORCH] = {"pytorch",
		    {"torch", "c10d", "c10::", "RuntimeError: CUDA error", "AcceleratorError",
		     NULL}},
    [FW_VLLM] = {"vllm", {"vllm", "CUDART error", NULL}},
    [FW_SGLANG] = {"sglang",
		   {"sglang", "sgl-kernel", "sgl_kernel", "Setup Custom allreduce failed", NULL}},
    [FW_TENSORRT_LLM] = {"tensorrt-llm",
			 {"tensorrt_llm", "tensorrt-llm", "trt-llm", "trtllm", NULL}},
    [FW_JAX] = {"jax", {"jax", "xla", NULL}},
    [FW_TENSORFLOW] = {"tensorflow", {"tensorflow", "stream_executor", NULL}},
    [FW_CUPY] = {"cupy", {"cupy", NULL}},
    [FW_PYCUDA] = {"pycuda", {"pycuda", "LogicError: cu", NULL}},
    [FW_CUDA_SAMPLES] = {"cuda-samples",
			 {"simpleP2P", "p2pBandwidthLatencyTest", "helper_cuda", NULL}},
    [FW_NVBANDWIDTH] = {"nvbandwidth", {"nvbandwidth", NULL}},
    [FW_NCCL_TESTS] = {"nccl-tests",
		       {"nccl-tests", "Test CUDA failure", "Test NCCL failure", NULL}},
    [FW_TRITON] = {"triton", {"tritonclient", "perf_analyzer", "CUDA shared memory region", NULL}},
    [FW_FABRIC_MANAGER] = {"fabric-manager",
			   {"fabricmanager", "fabric manager", "multicast team", NULL}},
    [FW_WSL] = {"wsl",
		{"WSL2", "WSL 2", "WSL ", " WSL", "(WSL", "microsoft-standard", "Docker Desktop",
		 NULL}},
    [FW_NVSHMEM] = {"nvshmem", {"nvshmem", NULL}},
    [FW_MSCCLPP] = {"mscclpp", {"mscclpp", "msccl++", NULL}},
    [FW_DEEPEP] = {"deepep", {"deep_ep", "deepep", NULL}},
    [FW_PADDLE] = {"paddle", {"paddle", "(External) CUDA error", NULL}},
    [FW_MXNET] = {"mxnet", {"mxnet", "kvstore/", NULL}},
    [FW_CUTORCH] = {"cutorch", {"cutorch", NULL}},
    [FW_CAFFE2] = {"caffe2", {"caffe2", "data_parallel_model", NULL}},
    [FW_FLASHINFER] = {"flashinfer", {"flashinfer", NULL}},
    [FW_TRANSFORMER_ENGINE] = {"transformer-engine",
			       {"transformer_engine", "Transformer Engine", "TransformerEngine",
				NULL}},
    [FW_UCX] = {"ucx", {"UCX ", "ucp_", "uct_", NULL}},
    [FW_GDR] = {"gdr", {"gdrcopy", "gdr_copy", "gdrdrv", "gdr_open", NULL}},
};

int explain_framework_lookup(const char *name)
{
	for (int k = 0; k < FW_COUNT; k++)
		if (strcmp(frameworks[k].name, name) == 0)
			return k;
	return -1;
}

const char *explain_framework_names(void)
{
	static char list[256];
	if (!list[0])
		for (int k = 0; k < FW_COUNT; k++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 k ? ", " : "", frameworks[k].name);
	return list;
}

/* "Cuda failure 217 '...'": NCCL's CUCHECK, which reports a failed driver call with its number
 * (src/include/cudawrap.h); the runtime checks of NCCL and the CUDA samples print no number there
 * ("Cuda failure 'x'", "Cuda failure simpleP2P.cu:120: 'x'"). Pasted lines often lose the
 * "NCCL WARN" before it. */
static bool names_nccl_driver_check(const char *text)
{
	static const char word[] = "Cuda failure ";
	for (const char *p = text; (p = strcasestr(p, word)); p++) {
		const char *q = p + strlen(word);
		if (!isdigit((unsigned char)*q))
			continue;
		while (isdigit((unsigned char)*q))
			q++;
		if (q[0] == ' ' && q[1] == '\'')
			return true;
	}
	return false;
}

/* Triton Inference Server's program, "tritonserver", but not its install folder
 * (/opt/tritonserver/...): other frameworks' backends run from there and print their own errors
 * with that path (lmdeploy's TurboMind allocator, FasterTransformer). */
static bool names_triton_server(const char *text)
{
	static const char word[] = "tritonserver";
	for (const char *p = text; (p = strcasestr(p, word)); p++)
		if (p == text || p[-1] != '/')
			return true;
	return false;
}

static unsigned read_frameworks(const char *text)
{
	unsigned found = names_nccl_driver_check(text) ? 1u << FW_NCCL : 0;
	if (names_triton_server(text))
		found |= 1u << FW_TRITON;
	for (int k = 0; k < FW_COUNT; k++)
		for (size_t m = 0; frameworks[k].markers[m]; m++)
			if (strcasestr(text, frameworks[k].markers[m]))
				found |= 1u << k;
	return found;
}

/* ---- Statuses ---- */

static bool is_word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Where word stands in text, not part of a longer identifier; case-insensitive unless exact. */
static const char *find_word(const char *text, const char *word, bool exact)
{
	size_t n = strlen(word);
	for (const char *p = text; (p = exact ? strstr(p, word) : strcasestr(p, word)); p++) {
		bool left = p == text || !is_word_char(p[-1]) || !is_word_char(word[0]);
		bool right = !is_word_char(p[n]) || !is_word_char(word[n - 1]);
		if (left && right)
			return p;
	}
	return NULL;
}

static void add_status(struct line_clues *c, int status, size_t span)
{
	if (status <= 0)
		return;
	for (size_t k = 0; k < c->n_statuses; k++)
		if (c->statuses[k] == status) {
			if (span > c->spans[k])
				c->spans[k] = span;
			return;
		}
	if (c->n_statuses >= LINE_STATUSES_MAX)
		return;
	c->statuses[c->n_statuses] = status;
	c->spans[c->n_statuses++] = span;
}

/* The word just before p (skipping the separators of "Error 802", "status=700", "failure: 1",
 * "returned (0x2c0)"), as [*ret_start, p'). */
static size_t word_before(const char *text, const char *p, const char **ret_start)
{
	while (p > text && strchr(" \t:=#(", p[-1]))
		p--;
	const char *end = p;
	while (p > text && isalpha((unsigned char)p[-1]))
		p--;
	*ret_start = p;
	return (size_t)(end - p);
}

/*
 * A number is read as a status when it is all the text, or when it follows a word that introduces
 * one ("Error 802", "Cuda failure 217", "status=700", "returned (0x2c0)", "return value: 205",
 * "failed: 800");
 * other numbers in a log line are device ordinals, bus ids and sizes. NCCL's own results ("NCCL
 * error 1") are not CUDA statuses.
 */
/* Whether p starts a CUDA call's name: cuXxx or cudaXxx. */
static bool starts_call_name(const char *p)
{
	if (strncmp(p, "cu", 2) != 0)
		return false;
	p += 2;
	if (strncmp(p, "da", 2) == 0 && isupper((unsigned char)p[2]))
		p += 2;
	return isupper((unsigned char)*p);
}

/* Whether the identifier that ends just before word (spaces skipped) is a CUDA call's name. */
static bool call_name_before(const char *text, const char *word)
{
	const char *p = word;
	while (p > text && p[-1] == ' ')
		p--;
	const char *end = p;
	while (p > text && is_word_char(p[-1]))
		p--;
	return p < end && starts_call_name(p);
}

/*
 * Whether the last call the text names before p is one of a library outside CUDA whose numbers are
 * errno values: GDRCopy (gdr_pin_buffer's "code=22"), libgdsync (gds_), verbs (ibv_, mlx5, and
 * the wrap_ibv_ wrappers whose failures CTRAN logs with a completion's status),
 * libfabric (fi_), librdmacm, the kernel's peer-memory API (nvidia_p2p_get_pages), NVML (whose
 * nvmlReturn_t codes run past CUDA's small statuses: 999 is NVML_ERROR_UNKNOWN). Verbs' memory
 * region, the word "MR" in capitals, counts as such a call: perftest's "Couldn't allocate MR with
 * error=14" is ibv_reg_mr's errno. So does GPUDirect Storage's cuFile, whose calls look like the
 * driver's (cuFileHandleRegister) but return its own CUfileOpError, 5000 and up (5030 "internal
 * error" in "cuFile err=5030"; CUDA.jl's "CUFILEError: ... (code 5001, ...)"), never a CUDA
 * status. A CUDA call named after it takes the number back.
 */
/* Whether the word [q, end) names a call of such a library (see foreign_call_before). */
static bool foreign_call_name(const char *q, const char *end)
{
	static const char *const prefixes[] = {"gdr_", "gds_",	"ibv_",	       "wrap_ibv_", "mlx5",
					       "fi_",  "rdma_", "nvidia_p2p_", "nvml",	    NULL};
	size_t len = (size_t)(end - q);
	if (strncasecmp(q, "cufile", 6) == 0 || (len == 2 && q[0] == 'M' && q[1] == 'R'))
		return true;
	for (size_t k = 0; prefixes[k]; k++)
		if (strncasecmp(q, prefixes[k], strlen(prefixes[k])) == 0 &&
		    len > strlen(prefixes[k]))
			return true;
	return false;
}

/*
 * Whether the word [q, end) is a system call written with its parentheses ("unix client connect()
 * error: 2", GPUDirect-TCPX's socket to its receive daemon): what follows is an errno, ENOENT here,
 * not CUDA's out of memory. "receive" is GPUDirect-TCPXO's own wrapper of recvmsg, whose status
 * prints the same way ("receive() error: 104", ECONNRESET).
 */
static bool system_call_name(const char *q, const char *end, const char *limit)
{
	static const char *const calls[] = {
	    "connect", "bind",	  "accept", "listen", "socket", "sendmsg", "recvmsg", "send",
	    "recv",    "receive", "open",   "mmap",   "ioctl",	"read",	   "write",   NULL};
	size_t len = (size_t)(end - q);
	if (end + 2 > limit || end[0] != '(' || end[1] != ')')
		return false;
	for (size_t k = 0; calls[k]; k++)
		if (len == strlen(calls[k]) && strncmp(q, calls[k], len) == 0)
			return true;
	return false;
}

static bool foreign_call_before(const char *text, const char *p)
{
	bool foreign = false;
	for (const char *q = text; q < p;) {
		if (!is_word_char(*q) || (q > text && is_word_char(q[-1]))) {
			q++;
			continue;
		}
		const char *end = q;
		while (end < p && is_word_char(*end))
			end++;
		if (foreign_call_name(q, end) || system_call_name(q, end, p))
			foreign = true;
		else if (starts_call_name(q))
			foreign = false;
		q = end;
	}
	return foreign;
}

/* Whether one of texts follows p in parentheses, after any spaces. */
static bool text_in_parentheses(const char *p, const char *const texts[], bool any_case)
{
	while (*p == ' ')
		p++;
	if (*p != '(')
		return false;
	for (size_t k = 0; texts[k]; k++) {
		size_t n = strlen(texts[k]);
		if (any_case ? strncasecmp(p + 1, texts[k], n) == 0
			     : strncmp(p + 1, texts[k], n) == 0)
			return true;
	}
	return false;
}

/*
 * Whether a verbs work completion's status text follows the number in parentheses, as
 * ibv_wc_status_str() spells it ("status=4(local protection error)", MoRI's CQE line): the number
 * is the completion's status, not CUDA's 4.
 */
static bool verbs_completion_status_after(const char *p)
{
	static const char *const texts[] = {"local length error",
					    "local QP operation error",
					    "local EE context operation error",
					    "local protection error",
					    "Work Request Flushed Error",
					    "memory management operation error",
					    "bad response error",
					    "local access error",
					    "remote invalid request error",
					    "remote access error",
					    "remote operation error",
					    "transport retry counter exceeded",
					    "RNR retry counter exceeded",
					    "local RDD violation error",
					    "remote invalid RD request",
					    "response timeout error",
					    "general error",
					    NULL};
	return text_in_parentheses(p, texts, true);
}

/*
 * Whether the number belongs to a failed verbs work completion as NCCL's InfiniBand transport
 * prints it ("NET/IB : Got completion from peer ... with error 4, opcode 1", "with status=12",
 * "status=IBV_WC_LOC_PROT_ERR(4)"): the status is rdma-core's ibv_wc_status, 4 a local protection
 * fault at the NIC, not CUDA's 4.
 */
static bool verbs_completion_before(const char *text, const char *word)
{
	const char *completion = strstr(text, "Got completion");
	return completion && completion < word;
}

/*
 * Whether the word introducing a number belongs to NCCL's own result: "NCCL error 1", and
 * CTranslate2's or a wrapper's "NCCL failed with error 2", where a few linking words separate
 * "NCCL" from "error". The number is an ncclResult_t then, not CUDA's status 2.
 */
static bool nccl_result_before(const char *text, const char *word)
{
	static const char *const links[] = {"failed", "with", "returned", "call", NULL};
	for (int hops = 0; hops < 4 && word > text; hops++) {
		const char *before;
		size_t m = word_before(text, word, &before);
		if (m == 0)
			return false;
		if (m == 4 && strncasecmp(before, "nccl", 4) == 0)
			return true;
		bool link = false;
		for (size_t k = 0; links[k] && !link; k++)
			link = m == strlen(links[k]) && strncasecmp(before, links[k], m) == 0;
		if (!link)
			return false;
		word = before;
	}
	return false;
}

/*
 * Whether "error N" in an NCCL warning is NCCL's own result: NCCL prints a failed job's or a
 * teardown step's ncclResult_t so ("ncclAsyncJobComplete: job 0x55 failed, job error 3",
 * "commReclaim: cleanup comm 0x55 rank 0 failed in destroy/abort, error 3", init.cc and group.cc),
 * and a CUDA status only with CUDA's name or a CUDA call before it ("Cuda failure 217", nvls.cc's
 * "CUDA error 801", "cuMemMap ... error 1").
 */
static bool nccl_warning_result(const char *text, const char *word, size_t n)
{
	if (n != 5 || strncasecmp(word, "error", 5) != 0)
		return false;
	const char *warn = strstr(text, "NCCL WARN");
	if (!warn || warn > word)
		return false;
	for (const char *q = warn + 9; q < word; q++) {
		if (strncasecmp(q, "cuda", 4) == 0)
			return false;
		if ((q == text || !is_word_char(q[-1])) && starts_call_name(q))
			return false;
	}
	return true;
}

/*
 * Whether the C library's text of an errno follows the number in parentheses, as strerror()
 * spells it with its capital ("Unexpected error 12 (Cannot allocate memory) from fi_mr_regattr()",
 * GASNet's "fi_write failed: 12(Cannot allocate memory)"): the number is that errno, not CUDA's
 * 12. CUDA's own texts are in lower case ("out of memory", "invalid argument").
 */
static bool errno_text_after(const char *p)
{
	static const char *const texts[] = {"Operation not permitted",
					    "No such file or directory",
					    "Input/output error",
					    "Bad file descriptor",
					    "Resource temporarily unavailable",
					    "Cannot allocate memory",
					    "Permission denied",
					    "Bad address",
					    "Device or resource busy",
					    "No such device",
					    "Invalid argument",
					    "No space left on device",
					    "Broken pipe",
					    "Operation not supported",
					    "Connection reset by peer",
					    "Connection refused",
					    "Connection timed out",
					    NULL};
	return text_in_parentheses(p, texts, false);
}

static bool number_is_status(const char *text, const char *start, const char *end, long value)
{
	static const char *const words[] = {"error",  "err",	  "code", "status", "failure",
					    "result", "returned", "rc",	  NULL};
	const char *p = text, *q = end;

	while (*p && isspace((unsigned char)*p))
		p++;
	while (*q && isspace((unsigned char)*q))
		q++;
	if (p == start && *q == '\0')
		return true;

	const char *word, *before;
	size_t n = word_before(text, start, &word);
	size_t m = word_before(text, word, &before);
	bool introduced = false;
	/* A whole word: verbs' "vendor_err 0x51" is the NIC's own code. */
	bool whole = word == text || !is_word_char(word[-1]);
	for (size_t k = 0; words[k] && !introduced && whole; k++)
		introduced = n == strlen(words[k]) && strncasecmp(word, words[k], n) == 0;
	/* Open MPI's "cuIpcOpenMemHandle return value:   217": "value" alone introduces sizes
	 * and counts, after "return" only a call's result. */
	if (!introduced && n == 5 && strncasecmp(word, "value", 5) == 0)
		introduced = m == 6 && strncasecmp(before, "return", 6) == 0;
	/* "cuMemCreate failed: 800" (Mooncake, many wrappers): after "failed" only where a CUDA
	 * call failed and a colon or an equals sign follows, since "failed 3 times" counts
	 * attempts and "mmap failed: 12" is an errno. */
	if (!introduced && n == 6 && strncasecmp(word, "failed", 6) == 0)
		introduced = call_name_before(text, word) &&
			     (memchr(word + n, ':', (size_t)(start - word - n)) ||
			      memchr(word + n, '=', (size_t)(start - word - n)));
	/* glog's CHECK_EQ as Caffe and MXNet use it, "Check failed: error == cudaSuccess (77 vs.
	 * 0)": the value checked against success is the status. */
	if (!introduced && strncmp(end, " vs", 3) == 0)
		introduced = (n == 11 && strncmp(word, "cudaSuccess", 11) == 0) ||
			     (n == 7 && strncmp(word, "SUCCESS", 7) == 0 && word >= text + 5 &&
			      strncmp(word - 5, "CUDA_", 5) == 0);
	if (!introduced)
		return false;
	/* NVSHMEM's "non-zero status: N" carries its own codes (0 to 7: 3 "not supported", 7
	 * "internal") as well as a failed call's status, which it prints with the call: a CUDA
	 * status before a CUDA call ("non-zero status: 101 cuMemCreate failed"), NVML's own return
	 * code before an NVML call ("non-zero status: 999 nvmlDeviceGetGpuFabricInfoV() failed",
	 * NVML_ERROR_UNKNOWN). */
	if (n == 6 && strncasecmp(word, "status", 6) == 0 && m == 4 &&
	    strncasecmp(before, "zero", 4) == 0 && before >= text + 4 &&
	    strncasecmp(before - 4, "non-", 4) == 0) {
		while (*end == ' ')
			end++;
		const char *call_end = end;
		while (is_word_char(*call_end))
			call_end++;
		if (foreign_call_name(end, call_end))
			return false;
		if (value <= 7)
			return starts_call_name(end);
	}
	if (foreign_call_before(text, start))
		return false;
	/* Codes of libraries outside CUDA that name no call: the NIC's "vendor error 136" after a
	 * verbs completion status (Open MPI's openib), and libfabric's EFA provider's own
	 * "EFA internal error: (4112)" (FI_EFA_ERR_*, 4096 and up). */
	if ((n == 5 || n == 3) && m == 6 && strncasecmp(before, "vendor", 6) == 0)
		return false;
	if (verbs_completion_before(text, word))
		return false;
	/* A process's exit status, "error running hook: exit status 1" (Docker, runc, Slurm's
	 * "exit code 1"): the number a program returned, not CUDA's. */
	if ((n == 6 || n == 4) && m == 4 && strncasecmp(before, "exit", 4) == 0)
		return false;
	/* A signal's name and number, Open MPI's "Signal: Bus error (7)": SIGBUS, not a status. */
	if (n == 5 && m == 3 && strncasecmp(before, "bus", 3) == 0)
		return false;
	if (n == 5 && m == 8 && strncasecmp(before, "internal", 8) == 0 && before >= text + 4 &&
	    strncasecmp(before - 4, "EFA ", 4) == 0)
		return false;
	/* Unified Runtime's status, as SYCL prints it: "level_zero backend failed with error: 20
	 * (UR_RESULT_ERROR_DEVICE_LOST)" is UR's 20, whichever backend (CUDA's too) raised it. */
	if (strncmp(end, " (UR_RESULT_", 12) == 0)
		return false;
	/* gRPC's own status before its text, as nvidia-imex-ctl prints it: "Query Status returned
	 * error code: 14 - failed to connect to all addresses" is gRPC's UNAVAILABLE. */
	if (strncmp(end, " - failed to connect to all addresses", 37) == 0)
		return false;
	/* NCCL's GIN over DOCA GPUNetIO, "NCCL WARN DOCA failure 12": a doca_error_t, not CUDA's.
	 */
	if (n == 7 && m == 4 && strncasecmp(word, "failure", 7) == 0 &&
	    strncasecmp(before, "DOCA", 4) == 0)
		return false;
	return !nccl_result_before(text, word) && !nccl_warning_result(text, word, n);
}

/* Decimal numbers (at most six digits) and 0x-prefixed hexadecimal ones read as statuses. */
/* CUDA's statuses end at 999 and HIP's at 1054; a larger number is another library's code
 * (ROCr's "hardware exception. code: 0x1016"). */
enum { LAST_HIP_STATUS = 1054 };

static void read_numbers(const char *text, struct line_clues *c)
{
	for (const char *p = text; *p;) {
		if (!isdigit((unsigned char)*p)) {
			p++;
			continue;
		}
		const char *start = p;
		long value;
		bool hex =
		    p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && isxdigit((unsigned char)p[2]);
		if (hex) {
			p += 2;
			while (isxdigit((unsigned char)*p))
				p++;
		} else {
			while (isdigit((unsigned char)*p))
				p++;
		}
		if ((start > text && (is_word_char(start[-1]) || start[-1] == '.')) ||
		    is_word_char(*p) || (*p == '.' && isdigit((unsigned char)p[1])))
			continue;
		/* Dates and times ("ERROR 03-28 21:38:23", vLLM's log prefix) are not statuses. */
		if ((*p == '-' || *p == ':') && isdigit((unsigned char)p[1]))
			continue;
		if (p - start > (hex ? 10 : 6))
			continue;
		value = strtol(start, NULL, hex ? 16 : 10);
		if (value > 0 && value <= LAST_HIP_STATUS && !verbs_completion_status_after(p) &&
		    !errno_text_after(p) && number_is_status(text, start, p, value))
			add_status(c, (int)value, (size_t)(p - start));
	}
}

/* A runtime message cut short at the end of the text ("... between these two device", "...
 * between these"): terminals and issue titles truncate long lines. At least 24 characters of it,
 * from a word's start, so that a few common words never name a status. Returns how much of the
 * message the text carries, 0 for none. */
static size_t cut_message_span(const char *text, const char *message)
{
	size_t len = strlen(text), full = strlen(message);
	while (len && (isspace((unsigned char)text[len - 1]) || strchr("'\".", text[len - 1])))
		len--;
	for (size_t k = full - 1 < len ? full - 1 : len; k >= 24; k--) {
		const char *start = text + len - k;
		if (start > text && is_word_char(start[-1]))
			continue;
		if (strncasecmp(start, message, k) == 0)
			return k;
	}
	return 0;
}

/* The same at the start of a text that continues a line a terminal cut ("all failed or operation
 * not supported on this OS", the rest of 304's message): at least 24 characters of the message's
 * end, up to a word's end. Returns how much, 0 for none. */
static size_t continued_message_span(const char *text, const char *message)
{
	while (isspace((unsigned char)*text))
		text++;
	size_t len = strlen(text), full = strlen(message);
	for (size_t k = full - 1 < len ? full - 1 : len; k >= 24; k--) {
		/* A piece of a word may start the line: "all failed" of "call failed". */
		const char *tail = message + full - k;
		if (strncasecmp(text, tail, k) == 0 && !is_word_char(text[k]))
			return k;
	}
	return 0;
}

/* A status named by its name or message: where, and by which spelling. */
struct status_words {
	int status;
	const char *name; /* its longest spelling in the text */
	bool exact;	  /* that spelling is matched with its case */
	const char *at;	  /* where it stands */
	size_t span;
};

/* The longer status whose message holds found[k]'s spelling, or NULL. */
static const struct status_words *status_words_around(const struct status_words *found,
						      size_t n_found, size_t k)
{
	for (size_t j = 0; j < n_found; j++)
		if (j != k && found[j].at && found[j].span > found[k].span &&
		    found[k].at >= found[j].at &&
		    found[k].at + found[k].span <= found[j].at + found[j].span)
			return &found[j];
	return NULL;
}

/*
 * Whether "invalid argument" at p is NCCL's own result, ncclInvalidArgument, as ncclGetErrorString
 * spells it ("NCCL error : invalid argument", "NCCL error in: ProcessGroupNCCL.cpp:1, invalid
 * argument"): after "NCCL error" with no CUDA failure named between them.
 */
static bool nccl_invalid_argument_at(const char *text, const char *p)
{
	const char *nccl = NULL;
	for (const char *q = text; (q = strcasestr(q, "nccl error")) && q < p; q++)
		nccl = q;
	if (!nccl)
		return false;
	static const char *const cuda[] = {"cuda failure", "cuda error", "cudaError", NULL};
	for (size_t k = 0; cuda[k]; k++) {
		const char *q = strcasestr(nccl, cuda[k]);
		if (q && q < p)
			return false;
	}
	return true;
}

/* Status names, CUDA's and HIP's, and runtime messages. A short message is matched with its case,
 * because strerror spells the same words capitalised ("Invalid argument", "Operation not
 * supported") for errno values that have nothing to do with CUDA. */
static void read_status_words(const char *text, struct line_clues *c)
{
	struct status_words found[LINE_STATUSES_MAX];
	size_t n_found = 0;

	for (size_t k = 0; n_found < LINE_STATUSES_MAX; k++) {
		int status = p2pg_status_at(k);
		const char *names[5];
		if (status < 0)
			break;
		if (status == 0 || !p2pg_status_spellings(status, &names[0], &names[1], &names[2]))
			continue;
		size_t n_names = 3 + p2pg_status_hip_names(status, &names[3]);
		struct status_words w = {status, NULL, false, NULL, 0};
		for (size_t m = 0; m < n_names; m++) {
			bool exact = m == 2 && strlen(names[m]) < 24;
			const char *p =
			    strlen(names[m]) > w.span ? find_word(text, names[m], exact) : NULL;
			if (p)
				w = (struct status_words){status, names[m], exact, p,
							  strlen(names[m])};
		}
		if (!w.span && strlen(names[2]) > 24) {
			w.span = cut_message_span(text, names[2]); /* not placed: at stays NULL */
			if (!w.span && (w.span = continued_message_span(text, names[2]))) {
				w.at = text + strspn(text, " \t\r\n");
				w.name = names[2];
			}
		}
		if (w.span)
			found[n_found++] = w;
	}
	/* A status's message inside another's names only the longer one: 304's "OS call failed or
	 * operation not supported on this OS" is not 801's "operation not supported". */
	for (size_t k = 0; k < n_found; k++) {
		const struct status_words *around;
		while (found[k].at && (around = status_words_around(found, n_found, k)))
			found[k].at =
			    find_word(around->at + around->span, found[k].name, found[k].exact);
		if (found[k].at && found[k].exact && found[k].status == 1 &&
		    nccl_invalid_argument_at(text, found[k].at))
			continue;
		if (found[k].at || !found[k].name)
			add_status(c, found[k].status, found[k].span);
	}
}

size_t line_status_span(const struct line_clues *c, int status)
{
	for (size_t k = 0; k < c->n_statuses; k++)
		if (c->statuses[k] == status)
			return c->spans[k];
	return 0;
}

bool line_names_status(const struct line_clues *c, int status)
{
	return line_status_span(c, status) > 0;
}

/* ---- Calls and files ---- */

static void add_name(char list[][LINE_NAME_LEN], size_t *n, const char *start, size_t len)
{
	if (*n >= LINE_NAMES_MAX || len == 0 || len >= LINE_NAME_LEN)
		return;
	for (size_t k = 0; k < *n; k++)
		if (strlen(list[k]) == len && strncmp(list[k], start, len) == 0)
			return;
	memcpy(list[*n], start, len);
	list[*n][len] = '\0';
	(*n)++;
}

/* cuFoo and cudaFoo identifiers that name calls: an upper-case letter after the prefix, and not
 * a status (cudaErrorX, cudaSuccess). */
static void read_apis(const char *text, struct line_clues *c)
{
	for (const char *p = text; *p; p++) {
		/* A wrapper's prefix ends in an underscore (pymapd's call_cuIpcOpenMemHandle). */
		if ((p > text && is_word_char(p[-1]) && p[-1] != '_') || !starts_call_name(p))
			continue;
		const char *q =
		    p + (strncmp(p, "cuda", 4) == 0 && isupper((unsigned char)p[4]) ? 4 : 2);
		if (strncmp(q, "Error", 5) == 0 || strncmp(q, "Success", 7) == 0)
			continue;
		const char *end = q;
		while (is_word_char(*end))
			end++;
		add_name(c->apis, &c->n_apis, p, (size_t)(end - p));
		p = end - 1;
	}
}

/*
 * Calls that libraries name in words rather than by identifier: UCX's "failed to open ipc mem
 * handle" (uct/cuda/cuda_ipc), Triton's "Failed to open the cudaIpcHandle" and "unable to create
 * cuda shared memory handle" (its CUDA shared-memory API wraps cudaIpcOpenMemHandle and
 * cudaIpcGetMemHandle), cuda-api-wrappers' "Failed setting the access mode to the virtual memory
 * mapping" (cuMemSetAccess). The call is what decides which rules apply, so such a line is read as
 * naming it.
 */
static const struct {
	const char *pattern;
	const char *api;
} call_phrases[] = {
    {"open(ing)?( the| an?)?( cuda)? ?ipc ?(mem(ory)? ?)?handle", "cudaIpcOpenMemHandle"},
    {"deserializ(e|ing) [a-z ]*cuda ?ipc ?(mem(ory)? ?)?handle", "cudaIpcOpenMemHandle"},
    {"(get|getting|create|creating|export|exporting)( the| an?)?( cuda)? ?ipc ?(mem(ory)? "
     "?)?handle",
     "cudaIpcGetMemHandle"},
    {"(create|creating)( the| an?)? cuda shared memory handle", "cudaIpcGetMemHandle"},
    {"access mode (of|to|for) the virtual memory mapping", "cuMemSetAccess"},
    /* A memory pool's access (cuMemPoolSetAccess, "pool access") is granted per device like a
     * mapping's; Open MPI's smcuda reports a failed IPC open as registering remote memory. */
    {"cuMemPoolSetAccess|pool (set )?access", "cuMemSetAccess"},
    {"Failed to register remote memory, rc=", "cuIpcOpenMemHandle"},
    {"import(ing)?( the| an?)? (shareable|fabric) (memory )?handle",
     "cuMemImportFromShareableHandle"},
    /* A line about IMEX channels or fabric handles is about fabric memory (cuMemCreate with
     * CU_MEM_HANDLE_TYPE_FABRIC); "CUDA IPC" beside a status, about opening a handle. */
    {"imex (channel|daemon|domain|stack)|fabric (memory )?handle", "cuMemCreate"},
    {"cuda ?ipc($|[^a-z0-9_])", "cudaIpcOpenMemHandle"},
    /* PyTorch's own entry points of CUDA IPC, in the tracebacks users paste with the error:
     * storage._share_cuda_() exports (torch/multiprocessing/reductions.py), _new_shared_cuda
     * and rebuild_cuda_tensor open (torch/csrc/StorageSharing.cpp). */
    {"_share_cuda_", "cudaIpcGetMemHandle"},
    {"_new_shared_cuda|rebuild_cuda_tensor", "cudaIpcOpenMemHandle"},
    /* TensorPipe's CUDA IPC channel (PyTorch RPC), named by its source path or namespace
     * (tensorpipe/channel/cuda_ipc/context_impl.cc, tensorpipe::channel::cuda_ipc), opens its
     * peers' memory with cudaIpcOpenMemHandle. */
    {"channel(/|::)cuda_ipc", "cudaIpcOpenMemHandle"},
};
#define CALL_PHRASES (sizeof(call_phrases) / sizeof(call_phrases[0]))

static regex_t call_phrase_regex[CALL_PHRASES];
static bool call_phrases_ready;
static pthread_once_t call_phrases_once = PTHREAD_ONCE_INIT;

static void compile_call_phrases(void)
{
	for (size_t k = 0; k < CALL_PHRASES; k++)
		if (regcomp(&call_phrase_regex[k], call_phrases[k].pattern,
			    REG_EXTENDED | REG_ICASE | REG_NOSUB) != 0) {
			while (k--)
				regfree(&call_phrase_regex[k]);
			return;
		}
	call_phrases_ready = true;
}

static void read_call_phrases(const char *text, struct line_clues *c)
{
	pthread_once(&call_phrases_once, compile_call_phrases);
	if (!call_phrases_ready)
		return;
	for (size_t k = 0; k < CALL_PHRASES; k++)
		if (regexec(&call_phrase_regex[k], text, 0, NULL, 0) == 0) {
			size_t before = c->n_apis;
			add_name(c->apis, &c->n_apis, call_phrases[k].api,
				 strlen(call_phrases[k].api));
			if (c->n_apis > before)
				c->api_in_words[before] = true;
		}
}

static const char *const source_extensions[] = {"c", "cc",  "cpp", "cu",  "cuh",
						"h", "hpp", "py",  "pyx", NULL};

static bool is_source_extension(const char *ext, size_t len)
{
	for (size_t k = 0; source_extensions[k]; k++)
		if (strlen(source_extensions[k]) == len &&
		    strncmp(ext, source_extensions[k], len) == 0)
			return true;
	return false;
}

static bool is_file_char(char c)
{
	return is_word_char(c) || c == '-' || c == '.';
}

/* "transport/shm.cc:590", "/workspace/csrc/custom_all_reduce.cuh:307": the name after the last
 * folder. */
static void read_files(const char *text, struct line_clues *c)
{
	for (const char *p = text; (p = strchr(p, '.')); p++) {
		const char *ext = p + 1, *end = ext;
		while (isalnum((unsigned char)*end))
			end++;
		if (!is_source_extension(ext, (size_t)(end - ext)) || is_file_char(*end))
			continue;
		const char *start = p;
		while (start > text && is_file_char(start[-1]))
			start--;
		if (start < p && (is_word_char(*start) || *start == '-'))
			add_name(c->files, &c->n_files, start, (size_t)(end - start));
	}
}

bool line_names_api(const struct line_clues *c, const char *api, bool *in_words)
{
	bool found = false, words = true;
	for (size_t k = 0; k < c->n_apis; k++)
		if (rules_api_matches(api, c->apis[k])) {
			found = true;
			words = words && c->api_in_words[k];
		}
	if (in_words)
		*in_words = found && words;
	return found;
}

bool line_names_file(const struct line_clues *c, const char *file)
{
	for (size_t k = 0; k < c->n_files; k++)
		if (strcasecmp(c->files[k], file) == 0)
			return true;
	return false;
}

bool explain_valid_file_name(const char *file)
{
	const char *dot = strrchr(file, '.');
	if (!dot || dot == file || strlen(file) >= LINE_NAME_LEN)
		return false;
	for (const char *p = file; p < dot; p++)
		if (!is_file_char(*p))
			return false;
	return is_source_extension(dot + 1, strlen(dot + 1));
}

void explain_line_read(const char *text, struct line_clues *ret)
{
	memset(ret, 0, sizeof(*ret));
	read_numbers(text, ret);
	read_status_words(text, ret);
	read_apis(text, ret);
	read_call_phrases(text, ret);
	read_files(text, ret);
	ret->frameworks = read_frameworks(text);
}

void explain_line_add_surroundings(struct line_clues *c, const char *text)
{
	struct line_clues around;
	explain_line_read(text, &around);
	for (size_t k = 0; k < around.n_apis; k++) {
		size_t before = c->n_apis;
		add_name(c->apis, &c->n_apis, around.apis[k], strlen(around.apis[k]));
		if (c->n_apis > before)
			c->api_in_words[before] = around.api_in_words[k];
	}
	for (size_t k = 0; k < around.n_files; k++)
		add_name(c->files, &c->n_files, around.files[k], strlen(around.files[k]));
	c->frameworks |= around.frameworks;
}
