/* SPDX-License-Identifier: MIT */
/*
 * What explain reads in a pasted line and how it ranks rules by it (rules/README.md, "Explain"):
 * statuses by name, message and number (hex included, dates and errno texts not), calls, source
 * files and frameworks, a rule's "context", and the validator messages of "context" and "notes";
 * then notes rendered into a failure's root cause.
 */
#include <errno.h>
#include <stdbool.h>

#include "p2pguard/facts.h"
#include "p2pguard/rules.h"
#include "rules-test.h"

struct captured {
	int n;
	int line;
	char message[512];
};

static void capture(void *userdata, const char *file, int line, const char *message)
{
	struct captured *c = userdata;
	(void)file;
	if (c->n++ == 0) {
		c->line = line;
		snprintf(c->message, sizeof(c->message), "%s", message);
	}
	fprintf(stderr, "  (reported %s:%d: %s)\n", file, line, message);
}

/* An entry with the given extra members (each ending in ",\n"), on lines after line 4. */
static const char *entry(const char *id, const char *codes, const char *extra)
{
	static char buf[8][4096];
	static int next;
	char *out = buf[next++ % 8];
	snprintf(out, sizeof(buf[0]),
		 "{\n"
		 "  \"id\": \"%s\",\n"
		 "  \"signature\": \"s\",\n"
		 "  \"root_cause\": \"Root cause.\",\n"
		 "  \"codes\": %s,\n"
		 "%s"
		 "  \"workarounds\": [{\"action\": \"a\", \"success_rate\": 0.5}],\n"
		 "  \"examples\": {\"matches\": [{\"text\": \"x\"}], \"near_misses\": [{\"text\": "
		 "\"y\"}]}\n"
		 "}\n",
		 id, codes, extra);
	return out;
}

static void expect_problem(const char *text, int line, const char *message)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	struct captured c = {0};
	check_int(p2pg_ruleset_add_text(rs, "t.json", text, strlen(text), capture, &c), -EINVAL);
	check_int(c.n, 1);
	check_int(c.line, line);
	check_str(c.message, message);
	p2pg_ruleset_free(rs);
}

static void add_ok(struct p2pg_ruleset *rs, const char *text)
{
	struct captured c = {0};
	check_int(p2pg_ruleset_add_text(rs, "t.json", text, strlen(text), capture, &c), 0);
	check_int(c.n, 0);
}

static void test_messages(void)
{
	const char *regex = "  \"regex\": \"peer\",\n";
	char extra[512];

	snprintf(extra, sizeof(extra), "%s  \"context\": {\"calls\": [\"cudaMemcpyPeer\"]},\n",
		 regex);
	expect_problem(entry("t/a", "[1]", extra), 7,
		       "unknown context clue \"calls\" (expected api, file or framework)");
	snprintf(extra, sizeof(extra), "%s  \"context\": {},\n", regex);
	expect_problem(entry("t/a", "[1]", extra), 7, "context needs at least one clue");
	snprintf(extra, sizeof(extra), "%s  \"context\": {\"file\": [\"transport/shm.cc\"]},\n",
		 regex);
	expect_problem(entry("t/a", "[1]", extra), 7,
		       "invalid source file name \"transport/shm.cc\" (expected a name such as "
		       "shm.cc or custom_all_reduce.cuh, without folders)");
	snprintf(extra, sizeof(extra), "%s  \"context\": {\"file\": [\"notes.txt\"]},\n", regex);
	expect_problem(entry("t/a", "[1]", extra), 7,
		       "invalid source file name \"notes.txt\" (expected a name such as shm.cc or "
		       "custom_all_reduce.cuh, without folders)");
	snprintf(extra, sizeof(extra), "%s  \"context\": {\"framework\": [\"torch\"]},\n", regex);
	expect_problem(entry("t/a", "[1]", extra), 7,
		       "unknown framework \"torch\" (expected one of nccl, pytorch, vllm, sglang, "
		       "tensorrt-llm, jax, tensorflow, cupy, pycuda, cuda-samples, nvbandwidth, "
		       "nccl-tests, triton, fabric-manager, wsl, nvshmem, mscclpp, deepep, paddle, "
		       "mxnet, cutorch, "
		       "caffe2, flashinfer, transformer-engine, ucx, gdr)");
	snprintf(extra, sizeof(extra), "%s  \"context\": {\"api\": [\"MemcpyPeer\"]},\n", regex);
	expect_problem(entry("t/a", "[1]", extra), 7, "invalid API name \"MemcpyPeer\"");
	snprintf(extra, sizeof(extra), "%s  \"context\": {\"api\": []},\n", regex);
	expect_problem(entry("t/a", "[1]", extra), 7, "empty list for \"context.api\"");
	snprintf(extra, sizeof(extra), "%s  \"context\": {\"framework\": [3]},\n", regex);
	expect_problem(entry("t/a", "[1]", extra), 7,
		       "field \"context.framework\" must be an array of strings");

	/* notes */
	snprintf(extra, sizeof(extra),
		 "%s  \"notes\": [{\"facts\": {\"p2p_probe\": \"hang\"}, "
		 "\"text\": \"t\"}],\n",
		 regex);
	expect_problem(entry("t/a", "[1]", extra), 7, "\"notes\" needs \"match\"");
	const char *match = "  \"match\": {\"facts\": {\"p2p_probe\": \"hang\"}},\n";
	snprintf(extra, sizeof(extra), "%s  \"notes\": [{\"facts\": {}, \"text\": \"t\"}],\n",
		 match);
	expect_problem(entry("t/a", "[]", extra), 7, "empty object for \"notes[0].facts\"");
	snprintf(extra, sizeof(extra), "%s  \"notes\": [{\"text\": \"t\"}],\n", match);
	expect_problem(entry("t/a", "[]", extra), 7, "missing required field \"notes[0].facts\"");
	snprintf(
	    extra, sizeof(extra),
	    "%s  \"notes\": [{\"facts\": {\"topology\": \"SYS\"}, \"text\": \"t\", \"x\": 1}],\n",
	    match);
	expect_problem(entry("t/a", "[]", extra), 7, "unknown field \"notes[0].x\"");
	snprintf(extra, sizeof(extra),
		 "%s  \"notes\": [{\"facts\": {\"colour\": \"red\"}, \"text\": \"t\"}],\n", match);
	expect_problem(entry("t/a", "[]", extra), 7, "unknown fact key \"colour\"");
	snprintf(
	    extra, sizeof(extra),
	    "%s  \"notes\": [{\"facts\": {\"topology\": \"SYS\"}, \"text\": \"on {topology\"}],\n",
	    match);
	expect_problem(entry("t/a", "[]", extra), 7, "unclosed \"{\" in note text");
	snprintf(
	    extra, sizeof(extra),
	    "%s  \"notes\": [{\"facts\": {\"topology\": \"SYS\"}, \"text\": \"on {bridge}\"}],\n",
	    match);
	expect_problem(entry("t/a", "[]", extra), 7, "note text names unknown fact \"{bridge}\"");
	snprintf(
	    extra, sizeof(extra),
	    "%s  \"notes\": [{\"facts\": {\"topology\": \"SYS\"}, \"text\": \"on {peer_pci}\"}],\n",
	    match);
	expect_problem(entry("t/a", "[]", extra), 7,
		       "note text names {peer_pci}, which the note's facts do not require");
	snprintf(extra, sizeof(extra),
		 "%s  \"notes\": [{\"facts\": {\"peer_pci\": {\"exists\": false}}, \"text\": \"on "
		 "{peer_pci}\"}],\n",
		 match);
	expect_problem(entry("t/a", "[]", extra), 7,
		       "note text names {peer_pci}, which the note's facts do not require");
}

static const char *first(const struct p2pg_ruleset *rs, const char *text)
{
	const struct p2pg_rule *found[8];
	size_t n = p2pg_ruleset_explain(rs, text, found, 8);
	return n ? p2pg_rule_id(found[0]) : "(none)";
}

static void test_reading(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/already", "[704]", "  \"match\": {\"status\": [704]},\n"));
	add_ok(rs, entry("t/unsupported", "[217]", "  \"match\": {\"status\": [217]},\n"));
	add_ok(rs, entry("t/notsupported", "[801]", "  \"match\": {\"status\": [801]},\n"));
	add_ok(rs, entry("t/nostatus", "[]", "  \"regex\": \"unhandled cuda error\",\n"));
	add_ok(rs, entry("t/triage217", "[217]", "  \"regex\": \"NCCL WARN Cuda failure.*\",\n"));
	add_ok(rs, entry("t/setactive", "[708]", "  \"match\": {\"status\": [708]},\n"));

	/* Hexadecimal statuses after a status word; cuda-gdb prints them so. */
	check_str(first(rs, "warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned "
			    "(0x2c0)"),
		  "t/already");
	check_str(first(rs, "status 0xd9"), "t/unsupported");
	check_str(first(rs, "pointer 0x2c0"), "(none)");
	/* 708 by each of its three spellings: the runtime's name, the driver's, the message. */
	check_str(first(rs, "cudaSetDeviceFlags returned cudaErrorSetOnActiveProcess"),
		  "t/setactive");
	check_str(first(rs, "cuDevicePrimaryCtxSetFlags: CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE"),
		  "t/setactive");
	check_str(first(rs, "CUDA error: cannot set while device is active in this process"),
		  "t/setactive");
	/* errno's capitalised texts are not CUDA's messages. */
	check_str(first(rs, "ibv_reg_dmabuf_mr failed with error Operation not supported"),
		  "(none)");
	check_str(first(rs, "cuMemMap: operation not supported"), "t/notsupported");
	/* 304's message holds 801's: it names 304 only, however the line spells it. */
	check_str(first(rs,
			"CUDA error #304 (cudaErrorOperatingSystem): OS call failed or operation "
			"not supported on this OS."),
		  "(none)");
	check_str(
	    first(rs, "cudaGetDeviceCount: OS call failed or operation not supported on this OS"),
	    "(none)");
	check_str(first(rs, "OS call failed or operation not supported on this OS, then cuMemMap: "
			    "operation not supported"),
		  "t/notsupported");
	/* A line naming no status is explained by a rule about none; naming one rules it out. */
	check_str(first(rs, "NCCL error in: x.cpp:1, unhandled cuda error, NCCL version 2.7.8"),
		  "t/nostatus");
	check_str(first(rs, "failed: unhandled cuda error. Last error: 'Cuda failure 2 'out of "
			    "memory''"),
		  "(none)");
	/* NCCL's own result numbers, a process's exit status and log dates are not CUDA
	 * statuses, so a rule about no status still explains the line. */
	static const char *const not_statuses[] = {
	    "RuntimeError: NCCL Error 1: unhandled cuda error",
	    "RuntimeError: NCCL failed with error 1: unhandled cuda error",
	    "error running hook: exit status 1, stderr: unhandled cuda error",
	    "srun: error: task 0: Exited with exit code 1: unhandled cuda error",
	    "(Worker pid=7) ERROR 03-28 21:38:23 x.py:44] unhandled cuda error",
	    /* The C library's text of an errno after the number, with its capital. */
	    "Unexpected error 12 (Cannot allocate memory) from fi_mr_regattr(): unhandled cuda "
	    "error",
	    "fi_write failed: 12(Cannot allocate memory): unhandled cuda error",
	    /* Past the largest CUDA and HIP statuses: another library's code. */
	    "An HSAIL operation resulted in a hardware exception. code: 0x1016, unhandled cuda "
	    "error",
	    "error 4118: unhandled cuda error",
	    "error 1060: unhandled cuda error",
	};
	for (size_t k = 0; k < sizeof not_statuses / sizeof not_statuses[0]; k++)
		check_str(first(rs, not_statuses[k]), "t/nostatus");
	check_str(first(rs, "Cuda failure with error 1: unhandled cuda error"), "(none)");
	check_str(first(rs, "Cuda failure 2 (out of memory): unhandled cuda error"), "(none)");
	/* A status named in the line beats a framework's wording about another status. */
	check_str(first(rs, "NCCL WARN Cuda failure 'peer access is already enabled'"),
		  "t/already");
	check_str(first(rs, "NCCL WARN Cuda failure 'peer access is not supported between these "
			    "two devices'"),
		  "t/triage217");
	/* A long runtime message cut at the end of the text still names its status; a short piece
	 * of one, or one cut in the middle of the text, does not. */
	check_str(first(rs, "error: peer access is not supported between these two device"),
		  "t/unsupported");
	check_str(first(rs, "(pid=1) Cuda failure 217 'peer access is not supported between these"),
		  "t/unsupported");
	check_str(first(rs, "peer access is not supported between these2"), "(none)");
	check_str(first(rs, "note: peer access is not"), "(none)");
	check_str(first(rs, "peer access is not supported between these and more text"), "(none)");
	/* Open MPI's "return value: N" is a call's result; "value" alone is not. */
	check_str(first(rs, "  cuIpcOpenMemHandle return value:   217"), "t/unsupported");
	check_str(first(rs, "buffer value: 217"), "(none)");
	/* NVSHMEM's "non-zero status: N" is its own code up to 7, a CUDA status beside a call. */
	check_str(first(rs, "init.cu:998: non-zero status: 3 building transport map failed"),
		  "(none)");
	check_str(first(rs, "mem_heap.cpp:1510: non-zero status: 801 cuMemCreate failed"),
		  "t/notsupported");
	/* Before or after an NVML call the number is NVML's own return code (999 is
	 * NVML_ERROR_UNKNOWN, 13 NVML_ERROR_FUNCTION_NOT_FOUND), not a CUDA status. */
	check_str(first(rs, "mem_transport.cpp:102: non-zero status: 801 "
			    "nvmlDeviceGetGpuFabricInfoV() failed"),
		  "(none)");
	check_str(first(rs, "nvmlDeviceGetHandleByPciBusId failed with error 801"), "(none)");
	/* After a call of a library outside CUDA the number is an errno (GDRCopy's code=22 is
	 * EINVAL, libgdsync's error 14 EFAULT); a CUDA call named after it takes it back. */
	check_str(first(rs, "error in gdr_pin_buffer with code=801"), "(none)");
	check_str(first(rs, "gds_create_cp() error 801 in ibv_exp_create_cq, old errno 22"),
		  "(none)");
	check_str(first(rs, "ibv_reg_mr failed, then cuMemMap returned error 801"),
		  "t/notsupported");
	check_str(first(rs, "nvidia_p2p_get_pages failed: status 801"), "(none)");
	/* CTRAN's wrappers of verbs log a work completion's status, not CUDA's. */
	check_str(first(rs, "CTRAN-IB: wrap_ibv_poll_cq failed, commHash d4 peer 0 remote qpn 46, "
			    "with status=801, 'transport retry counter exceeded'"),
		  "(none)");
	check_str(first(rs, "my_gdr_pin error 801"), "t/notsupported"); /* not the prefix */
	/* Verbs' memory region, "MR" in capitals, is verbs' too (perftest's errno). */
	check_str(first(rs, "Couldn't allocate MR with error=801"), "(none)");
	check_str(first(rs, "Couldn't allocate MR, then cuMemMap returned error 801"),
		  "t/notsupported");
	check_str(first(rs, "MRI error 801"), "t/notsupported"); /* not the word */
	/* GPUDirect Storage's cuFile returns its own statuses (5000 and up), not CUDA's. */
	check_str(first(rs, "cuFileHandleRegister failed (cuFile err=801, cuda_err=0)"), "(none)");
	check_str(first(rs, "cuFileHandleRegister returned an error = 801"), "(none)");
	check_str(first(rs, "cuFileRead failed, then cuMemMap returned error 801"),
		  "t/notsupported");
	/* CUDA.jl's exception type spells the library in capitals. */
	check_str(first(rs, "CUFILEError: driver is not loaded (code 801, CU_FILE_DRIVER)"),
		  "(none)");
	/* A status word inside an identifier introduces nothing: verbs' vendor_err is the NIC's. */
	check_str(first(rs, "local protection error (syndrome 0x4, vendor_err 0x321)"), "(none)");
	check_str(first(rs, "local protection error (err 0x321)"), "t/notsupported");
	/* The NIC's code after a verbs completion status, and the EFA provider's own codes. */
	check_str(first(rs, "error polling LP CQ with status REMOTE ACCESS ERROR status number 10 "
			    "for wr_id 25e14b8 opcode 3  vendor error 801 qp_idx 0"),
		  "(none)");
	check_str(first(rs, "EFA internal error: (801) Failure to post internal receive buffers"),
		  "(none)");
	check_str(first(rs, "internal error: (801)"), "t/notsupported");
	/* SYCL prints Unified Runtime's status with its name, whatever the backend. */
	check_str(
	    first(rs, "cuda backend failed with error: 801 (UR_RESULT_ERROR_UNSUPPORTED_FEATURE)"),
	    "(none)");
	/* nvidia-imex-ctl prints gRPC's status before gRPC's text. */
	check_str(first(rs, "Query Status returned error code: 801 - failed to connect to all "
			    "addresses; last error: UNKNOWN"),
		  "(none)");
	/* NCCL's GIN prints DOCA GPUNetIO's own doca_error_t after "DOCA failure". */
	check_str(
	    first(rs, "transport/net_ib/gdaki/gin_host_gdaki.cc:366 NCCL WARN DOCA failure 801"),
	    "(none)");
	check_str(first(rs, "NCCL WARN Cuda failure 801"), "t/notsupported");
	/* Open MPI names a fatal signal by its name and number: SIGBUS's 7, not a status. */
	check_str(first(rs, "[node07:41233] Signal: Bus error (801)"), "(none)");
	check_str(first(rs, "[node07:41233] Signal: Host error (801)"), "t/notsupported");
	/* CUDA statuses are never negative: "returned -1" is a C call's result, not status 1. */
	add_ok(rs, entry("t/efault", "[]", "  \"regex\": \"Bad address\",\n"));
	check_str(first(rs, "process_vm_writev(pid=1 length=64) returned -801: Bad address"),
		  "t/efault");
	check_str(first(rs, "cuMemMap returned -801"), "(none)");
	check_str(first(rs, "cuMemMap returned 801"), "t/notsupported");
	/* After a system call written with its parentheses the number is its errno (ENOENT from
	 * connect() to a daemon's socket), not a CUDA status; without them, or after a CUDA call
	 * named later, it is read as before. */
	check_str(first(rs, "unix client connect() error: 801 Bad address"), "t/efault");
	check_str(first(rs, "connect error: 801"), "t/notsupported");
	check_str(first(rs, "unix client receive() error: 801"), "(none)");
	check_str(first(rs, "connect() failed, then cuMemMap returned error 801"),
		  "t/notsupported");
	/* A verbs work completion's status, its text in parentheses, is not CUDA's; a CUDA
	 * message in parentheses keeps the number a status. */
	check_str(first(rs, "CQE error: wr_id=17 status=801(local protection error) Bad address"),
		  "t/efault");
	check_str(first(rs, "cuMemMap status=801 (operation not supported)"), "t/notsupported");
	/* NCCL's InfiniBand transport prints a failed completion's verbs status and the NIC's
	 * syndrome ("vendor err"); neither is CUDA's. */
	check_str(first(rs, "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4321> with error "
			    "801, opcode 1, len 0, vendor err 81"),
		  "(none)");
	check_str(first(rs, "NET/IB: Got completion from peer 10.0.0.2<4321> with status=801 "
			    "opcode=0 len=0 vendor err 801 (Send)"),
		  "(none)");
	check_str(first(rs, "NET/IB : Got a warning with error 801"), "t/notsupported");
	check_str(first(rs, "vendor err 801"), "(none)");
	/* An NCCL warning's "error N" is NCCL's own result unless CUDA or a CUDA call is named
	 * before it. */
	check_str(first(rs, "NCCL WARN commReclaim: cleanup comm 0x55 rank 3 failed in "
			    "destroy/abort, error 801"),
		  "(none)");
	check_str(first(rs, "NCCL WARN ncclAsyncJobComplete: job 0x55 failed, job error 801"),
		  "(none)");
	check_str(first(rs, "NCCL WARN Failed to bind NVLS memory : CUDA error 801 'x'"),
		  "t/notsupported");
	check_str(first(rs, "NCCL WARN Call to cuMemMap failed with error 801"), "t/notsupported");
	check_str(first(rs, "commReclaim: cleanup comm 0x55 failed in destroy/abort, error 801"),
		  "t/notsupported");
	/* At the start of the line too, and "cu" must start a call's name. */
	check_str(first(rs, "non-zero status: 3 building transport map failed"), "(none)");
	check_str(first(rs, "x: non-zero status: 3 current device"), "(none)");
	p2pg_ruleset_free(rs);
	rs = p2pg_ruleset_new();
	add_ok(rs,
	       entry("t/transportmap", "[]", "  \"regex\": \"building transport map failed\",\n"));
	check_str(first(rs, "init.cu:998: non-zero status: 3 building transport map failed"),
		  "t/transportmap");
	check_str(
	    first(rs, "x.cu:1: non-zero status: 3 cuInit failed building transport map failed"),
	    "(none)");
	p2pg_ruleset_free(rs);
}

static void test_frameworks(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/nccl", "[217]",
			 "  \"regex\": \"peer access is not supported\",\n"
			 "  \"context\": {\"framework\": [\"nccl\"]},\n"));
	add_ok(rs, entry("t/tests", "[700]",
			 "  \"match\": {\"status\": [700]},\n"
			 "  \"context\": {\"framework\": [\"nccl-tests\"]},\n"));
	add_ok(rs, entry("t/triton", "[1]",
			 "  \"regex\": \"failed to open CUDA IPC handle\",\n"
			 "  \"context\": {\"framework\": [\"triton\"]},\n"));

	/* NCCL's driver check prints the number before the quoted message; the samples' and NCCL's
	 * runtime checks do not. */
	check_str(first(rs, "(Runner pid=7) Cuda failure 217 'peer access is not supported between "
			    "these two devices'"),
		  "t/nccl");
	check_str(first(rs, "Cuda failure simpleP2P.cu:120: 'peer access is not supported between "
			    "these two devices'"),
		  "(none)");
	check_str(first(rs, "Cuda failure 217: peer access is not supported between these two "
			    "devices"),
		  "(none)");
	check_str(first(rs, "n1: Test CUDA failure common.cu:297 'an illegal memory access was "
			    "encountered'"),
		  "t/tests");
	check_str(first(rs, "CUDA error at common.cu:297 code=700(cudaErrorIllegalAddress)"),
		  "(none)");
	check_str(first(rs, "failed to register CUDA shared memory region 'x': failed to open CUDA "
			    "IPC handle: invalid argument"),
		  "t/triton");
	check_str(first(rs, "triton.compiler: failed to open CUDA IPC handle: invalid argument"),
		  "(none)");
	/* The server's program names it; its install folder, where other frameworks' backends run
	 * (lmdeploy's TurboMind, FasterTransformer), does not. */
	check_str(first(rs, "tritonserver: failed to open CUDA IPC handle: invalid argument"),
		  "t/triton");
	check_str(first(rs, "what(): [FT][ERROR] failed to open CUDA IPC handle: invalid argument "
			    "/opt/tritonserver/lmdeploy/src/turbomind/utils/allocator.h:252"),
		  "(none)");
	p2pg_ruleset_free(rs);
}

static void test_context(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/general", "[217]", "  \"match\": {\"status\": [217]},\n"));
	add_ok(rs,
	       entry("t/copy", "[1]",
		     "  \"match\": {\"status\": [1]},\n"
		     "  \"context\": {\"api\": [\"cudaMemcpyPeer\", \"cudaMemcpyPeerAsync\"]},\n"));
	add_ok(rs, entry("t/shm", "[217]",
			 "  \"regex\": \"Cuda failure( [0-9]+)? 'peer access is not supported\",\n"
			 "  \"context\": {\"file\": [\"shm.cc\"]},\n"));
	add_ok(rs, entry("t/nccl", "[217]",
			 "  \"regex\": \"NCCL WARN Cuda failure( [0-9]+)? 'peer access is not "
			 "supported between these two devices'\",\n"));
	add_ok(rs, entry("t/sgl", "[217]",
			 "  \"regex\": \"peer access is not supported\",\n"
			 "  \"context\": {\"file\": [\"custom_all_reduce.cuh\"], \"framework\": "
			 "[\"sglang\"]},\n"));

	/* A rule with a context needs it named: a bare invalid argument is not a copy's. */
	check_str(first(rs, "RuntimeError: CUDA error: invalid argument"), "(none)");
	check_str(first(rs, "cudaMemcpyPeerAsync failed: invalid argument"), "t/copy");
	check_str(first(rs, "cudaMemcpyPeerAsync_ptsz returned 1"), "t/copy");
	/* A wrapper's name around the call (pymapd's call_cuIpcOpenMemHandle). */
	check_str(first(rs, "Call to call_cudaMemcpyPeerAsync results in cudaErrorInvalidValue"),
		  "t/copy");
	check_str(first(rs, "Call to mycudaMemcpyPeerAsync results in cudaErrorInvalidValue"),
		  "(none)");
	check_str(first(rs, "cudaIpcOpenMemHandle failed: invalid argument"), "(none)");
	/* The named file comes before the length of the match. */
	check_str(first(rs, "host:1:2 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer "
			    "access is not supported between these two devices'"),
		  "t/shm");
	check_str(first(rs, "host:1:2 [0] transport/p2p.cc:590 NCCL WARN Cuda failure 217 'peer "
			    "access is not supported between these two devices'"),
		  "t/nccl");
	/* Two clues named beat one. */
	check_str(first(rs,
			"sglang: Failed: Cuda error /x/custom_all_reduce.cuh:307 'peer access is "
			"not supported between these two devices'"),
		  "t/sgl");
	check_str(first(rs, "peer access is not supported between these two devices"), "t/general");
	p2pg_ruleset_free(rs);
}

/* A framework's rule found through a status it lists, where the line names its file or call
 * but not its wording; the narrower causes of one failure ordered by confidence. */
static void test_anchored(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/car", "[1, 208]",
			 "  \"regex\": \"custom_all_reduce\\\\.cuh:[0-9]+ 'invalid argument'\",\n"
			 "  \"context\": {\"file\": [\"custom_all_reduce.cuh\"], \"framework\": "
			 "[\"vllm\", \"sglang\"]},\n"));
	add_ok(rs, entry("t/oom", "[2]",
			 "  \"regex\": \"Setup failed with\",\n"
			 "  \"context\": {\"framework\": [\"sglang\"]},\n"));
	add_ok(rs, entry("t/p2pcc", "[1, 101]",
			 "  \"regex\": \"NCCL WARN Cuda failure( [0-9]+)? 'invalid argument'\",\n"
			 "  \"context\": {\"file\": [\"p2p.cc\", \"p2p.cu\"]},\n"));
	add_ok(
	    rs,
	    entry("t/ipcopen", "[1]",
		  "  \"regex\": \"failed to open CUDA IPC handle : [0-9]+ invalid argument\",\n"));
	add_ok(rs, entry("t/split", "[217]",
			 "  \"match\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"status\": [217], "
			 "\"facts\": {\"cuda_visible_devices\": {\"exists\": true}, "
			 "\"peers_unreachable\": 0}},\n"
			 "  \"context\": {\"api\": [\"cudaIpcOpenMemHandle\"]},\n"
			 "  \"confidence\": 0.85,\n"));
	add_ok(rs, entry("t/lazy", "[217]",
			 "  \"match\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"status\": [217], "
			 "\"facts\": {\"peers_unreachable\": {\"gte\": 1}}},\n"
			 "  \"context\": {\"api\": [\"cudaIpcOpenMemHandle\"]},\n"
			 "  \"confidence\": 0.8,\n"));

	/* Another wording around the file and the status. */
	check_str(
	    first(rs,
		  "RuntimeError: Runtime check failed at /x/sgl_kernel/custom_all_reduce.cuh:37: "
		  "CUDA error: invalid argument"),
	    "t/car");
	check_str(
	    first(rs, "n1:8:9 [1] transport/p2p.cc:290 NCCL WARN Cuda failure 101 'invalid devi"),
	    "t/p2pcc");
	/* A framework alone does not find a rule through a status. */
	check_str(first(rs, "[TP0] sglang RuntimeError: CUDA error: out of memory"), "(none)");
	check_str(first(rs, "[TP0] sglang: CUDA error: invalid argument"), "(none)");
	/* A rule whose own wording matches comes before one found through the file alone. */
	check_str(first(rs,
			"h:1:2 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle "
			": 11 invalid argument"),
		  "t/ipcopen");
	/* Narrower causes: the likelier first, however many facts each tests. */
	check_str(first(rs,
			"Program hit cudaErrorPeerAccessUnsupported (error 217) on CUDA API call "
			"to cudaIpcOpenMemHandle."),
		  "t/split");
	p2pg_ruleset_free(rs);
}

/* Calls that libraries name in words (UCX, Triton, cuda-api-wrappers) find the call's rules, but
 * rank below a rule whose own wording matches; "failed:" introduces a status. */
static void test_calls_in_words(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/open400", "[400]",
			 "  \"match\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"status\": [400]},\n"
			 "  \"context\": {\"api\": [\"cudaIpcOpenMemHandle\"]},\n"));
	add_ok(rs, entry("t/open1", "[1]",
			 "  \"match\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"status\": [1]},\n"
			 "  \"context\": {\"api\": [\"cudaIpcOpenMemHandle\"]},\n"));
	add_ok(rs, entry("t/get1", "[1]",
			 "  \"match\": {\"api\": [\"cudaIpcGetMemHandle\"], \"status\": [1]},\n"
			 "  \"context\": {\"api\": [\"cudaIpcGetMemHandle\"]},\n"));
	add_ok(rs, entry("t/access1", "[1]",
			 "  \"match\": {\"api\": [\"cuMemSetAccess\"], \"status\": [1]},\n"
			 "  \"context\": {\"api\": [\"cuMemSetAccess\"]},\n"));
	add_ok(rs, entry("t/create800", "[800]",
			 "  \"match\": {\"api\": [\"cuMemCreate\"], \"status\": [800]},\n"
			 "  \"context\": {\"api\": [\"cuMemCreate\"]},\n"));
	add_ok(
	    rs,
	    entry("t/ncclopen", "[1]",
		  "  \"regex\": \"failed to open CUDA IPC handle : [0-9]+ invalid argument\",\n"));

	check_str(first(rs,
			"Failed to initialize CUDA shared memory pool in Python stub: Failed to "
			"open the cudaIpcHandle. error: invalid resource handle"),
		  "t/open400");
	check_str(first(rs, "failed to register CUDA shared memory region 'x': failed to open CUDA "
			    "IPC handle: invalid resource handle"),
		  "t/open400");
	check_str(first(rs, "uct_cuda_ipc: failed to open ipc mem handle: invalid argument"),
		  "t/open1");
	check_str(first(rs, "could not create the IPC memory handle: invalid argument"), "t/get1");
	check_str(first(rs, "cuMemPoolSetAccess(pool, &desc, 1) failed: invalid argument"),
		  "t/access1");
	/* 907's message holds 800's: a capturing stream's event is not cuMemCreate's refusal. */
	check_str(first(rs, "cuMemCreate failed: operation not permitted"), "t/create800");
	check_str(first(rs,
			"cuMemCreate failed: operation not permitted on an event last recorded in "
			"a capturing stream"),
		  "(none)");
	check_str(first(rs, "Failed setting the access mode to the virtual memory mapping to the "
			    "range of size 4194304 bytes at 0x7f00: invalid argument"),
		  "t/access1");
	/* The library's own wording still comes first. */
	check_str(first(rs, "h:1:2 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC "
			    "handle : 11 invalid argument"),
		  "t/ncclopen");
	/* Words near a call are not the call: a handle that is not IPC's. */
	check_str(first(rs, "failed to open file handle: invalid argument"), "(none)");
	/* PyTorch's IPC entry points in a pasted traceback line. */
	check_str(first(rs, "(event_sync_required) = storage._share_cuda_() RuntimeError: CUDA "
			    "error: invalid argument"),
		  "t/get1");
	check_str(first(rs,
			"File \"torch/multiprocessing/reductions.py\", line 147, in "
			"rebuild_cuda_tensor: RuntimeError: CUDA error: invalid resource handle"),
		  "t/open400");
	/* TensorPipe's CUDA IPC channel opens handles; UCX's cuda_ipc folder is not the phrase. */
	check_str(first(rs, "tensorpipe/channel/cuda_ipc/channel_impl.cc:120 CUDA error: invalid "
			    "resource handle"),
		  "t/open400");
	check_str(first(rs, "src/uct/cuda/cuda_ipc/cuda_ipc_md.c:120 CUDA error: invalid resource "
			    "handle"),
		  "(none)");
	/* IMEX and fabric handles are about fabric memory; "CUDA IPC" with a status, an open. */
	check_str(first(rs, "fabric handle allocation failed without an IMEX channel: "
			    "CUDA_ERROR_NOT_PERMITTED"),
		  "t/create800");
	check_str(first(rs, "LMCache: CUDA IPC buffer import failed: CUDA_ERROR_INVALID_HANDLE"),
		  "t/open400");
	check_str(first(rs, "NvlinkTransport: cuMemCreate failed: 800"), "t/create800");
	check_str(first(rs, "cuMemCreate failed 800 times"), "(none)");
	/* "failed: N" is a status only after a CUDA call: "mmap failed: 12" is an errno. */
	check_str(first(rs, "failed to open ipc mem handle after connect failed: 1"), "(none)");
	/* Other IPC calls do not name the open: "CUDA IPC" inside an identifier is not the
	 * phrase. */
	check_str(first(rs, "cudaIpcCloseMemHandle failed: invalid resource handle"), "(none)");
	check_str(first(rs, "cudaIpcGetEventHandle returned 400"), "(none)");
	p2pg_ruleset_free(rs);
}

/* A framework's folder ranks its rules as if they named the framework; Fabric Manager's log is a
 * framework of its own. */
static void test_framework_folders(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("tensorrt-llm/peer", "[217]",
			 "  \"regex\": \"\\\\[TensorRT-LLM\\\\]\\\\[ERROR\\\\].*peer access is not "
			 "supported\",\n"));
	add_ok(rs, entry("t/ipc217", "[217]",
			 "  \"match\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"status\": [217]},\n"
			 "  \"context\": {\"api\": [\"cudaIpcOpenMemHandle\"]},\n"));
	add_ok(rs, entry("t/nvls", "[]",
			 "  \"regex\": \"in the multicast team request setup\",\n"
			 "  \"context\": {\"framework\": [\"fabric-manager\"]},\n"));

	check_str(first(rs,
			"[TensorRT-LLM][ERROR] CUDA runtime error in cudaIpcOpenMemHandle(p, h, "
			"cudaIpcMemLazyEnablePeerAccess): peer access is not supported between "
			"these two devices (/app/cpp/tensorrt_llm/runtime/ipcUtils.cpp:90)"),
		  "tensorrt-llm/peer");
	check_str(first(rs, "cudaIpcOpenMemHandle: peer access is not supported between these two "
			    "devices"),
		  "t/ipc217");
	check_str(first(rs,
			"[ERROR] [tid 5] failed to find the GPU handle 12 in the multicast team "
			"request setup 42."),
		  "t/nvls");
	check_str(first(rs, "request setup failed"), "(none)");
	p2pg_ruleset_free(rs);

	/* WSL 2 is named like a framework: a status with it finds a rule that needs it. */
	rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/wsl", "[400]",
			 "  \"match\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"status\": [400]},\n"
			 "  \"context\": {\"api\": [\"cudaIpcOpenMemHandle\"], \"framework\": "
			 "[\"wsl\"]},\n"));
	check_str(first(rs, "WSL2 not working ? RuntimeError: CUDA error: invalid resource handle"),
		  "t/wsl");
	check_str(first(rs,
			"Linux 5.15.153.1-microsoft-standard-WSL2: CUDA error: invalid resource "
			"handle"),
		  "t/wsl");
	check_str(first(rs, "Failed to deserialize from cached pooled CUDA IPC handle (CUDA error: "
			    "invalid resource handle"),
		  "t/wsl");
	check_str(first(rs, "RuntimeError: CUDA error: invalid resource handle"), "(none)");
	p2pg_ruleset_free(rs);
}

/* A triage answer (category "triage") is for a line that names no cause: a rule that names one
 * and that the line finds as well comes first, even when the triage's regex matches more of the
 * line; alone, the triage answers. */
static void test_triage_last(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/fault-triage", "[101]",
			 "  \"category\": \"triage\",\n"
			 "  \"regex\": \"CUDA driver error: invalid device ordinal\",\n"));
	add_ok(rs, entry("t/rendezvous", "[101]", "  \"regex\": \"symm_mem.rendezvous\",\n"));

	check_str(first(rs, "\"CUDA driver error: invalid device ordinal\" when calling "
			    "`symm_mem.rendezvous`"),
		  "t/rendezvous");
	check_str(first(rs, "RuntimeError: CUDA driver error: invalid device ordinal"),
		  "t/fault-triage");
	p2pg_ruleset_free(rs);

	/* Without the category the longer match wins, as for any two rules. */
	rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/fault", "[101]",
			 "  \"regex\": \"CUDA driver error: invalid device ordinal\",\n"));
	add_ok(rs, entry("t/rendezvous", "[101]", "  \"regex\": \"symm_mem.rendezvous\",\n"));
	check_str(first(rs, "\"CUDA driver error: invalid device ordinal\" when calling "
			    "`symm_mem.rendezvous`"),
		  "t/fault");
	p2pg_ruleset_free(rs);
}

/* A triage answer that names a status in CUDA's words answers that status however the line
 * spells it: by number, by HIP's name, or by the bare message. */
static void test_triage_by_status(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/ordinal-triage", "[101]",
			 "  \"category\": \"triage\",\n"
			 "  \"regex\": \"invalid device ordinal|cudaErrorInvalidDevice\",\n"));
	add_ok(rs, entry("t/argument-triage", "[1]",
			 "  \"category\": \"triage\",\n"
			 "  \"regex\": \"CUDA error: invalid argument\",\n"));
	add_ok(rs, entry("t/library-triage", "[801]",
			 "  \"category\": \"triage\",\n"
			 "  \"regex\": \"Cuda failure 801\",\n"));
	add_ok(rs, entry("t/framework-triage", "[101]",
			 "  \"category\": \"triage\",\n"
			 "  \"context\": {\"framework\": [\"nccl\"]},\n"
			 "  \"regex\": \"invalid device ordinal\",\n"));
	check_str(first(rs, "CUDA error 101"), "t/ordinal-triage");
	check_str(first(rs, "hipErrorInvalidDevice"), "t/ordinal-triage");
	check_str(first(rs, "Test HIP failure common.cu:1129 'hipErrorInvalidDevice'"),
		  "t/ordinal-triage");
	/* Its regex does not match the status's own spellings: its wording is a library's. */
	check_str(first(rs, "RuntimeError: invalid argument"), "(none)");
	check_str(first(rs, "error 801"), "(none)");
	/* HIP's name inside a longer one is not the status. */
	check_str(first(rs, "hipErrorInvalidDevicePointer"), "(none)");
	p2pg_ruleset_free(rs);

	rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/argument-triage", "[1]",
			 "  \"category\": \"triage\",\n"
			 "  \"regex\": \"cudaErrorInvalidValue\",\n"));
	check_str(first(rs, "invalid argument"), "t/argument-triage");
	check_str(first(rs, "hipErrorInvalidValue"), "t/argument-triage");
	/* The C library's errno text and NCCL's own result are not CUDA's status 1. */
	check_str(first(rs, "mmap failed: Invalid argument"), "(none)");
	check_str(first(rs, "NCCL error : invalid argument"), "(none)");
	check_str(first(rs, "NCCL error in: ProcessGroupNCCL.cpp:12, invalid argument"), "(none)");
	check_str(first(rs, "NCCL error: Cuda failure 'invalid argument'"), "t/argument-triage");
	p2pg_ruleset_free(rs);
}

/* A triage's other codes are its status's numbers before CUDA 10.1, and glog's CHECK_EQ prints
 * the status it checked against success. */
static void test_triage_legacy_numbers(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/fault-triage", "[700, 77]",
			 "  \"category\": \"triage\",\n"
			 "  \"regex\": \"an illegal memory access was encountered\",\n"));
	check_str(first(rs, "Check failed: error == cudaSuccess (77 vs. 0)"), "t/fault-triage");
	check_str(first(rs, "Check failed: e == CUDA_SUCCESS (700 vs. 0)"), "t/fault-triage");
	check_str(first(rs, "cuda runtime error (77)"), "t/fault-triage");
	check_str(first(rs, "Check failed: status == CUDNN_STATUS_SUCCESS (77 vs. 0)"), "(none)");
	check_str(first(rs, "Check failed: count == 2 (77 vs. 0)"), "(none)");
	p2pg_ruleset_free(rs);
}

/* A line a terminal cut goes on with the rest of a message: its tail names the status, and the
 * shorter message inside it names nothing. */
static void test_continued_message(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(rs, entry("t/notsupported", "[801]", "  \"match\": {\"status\": [801]},\n"));
	add_ok(rs, entry("t/os", "[304]", "  \"match\": {\"status\": [304]},\n"));
	check_str(first(rs, "all failed or operation not supported on this OS"), "t/os");
	check_str(first(rs, "  failed or operation not supported on this OS"), "t/os");
	check_str(first(rs, "operation not supported"), "t/notsupported");
	check_str(first(rs, "x: operation not supported on this OS"), "t/notsupported");
	p2pg_ruleset_free(rs);
}

static void test_notes(void)
{
	struct p2pg_ruleset *rs = p2pg_ruleset_new();
	add_ok(
	    rs,
	    entry("t/hang", "[]",
		  "  \"match\": {\"facts\": {\"p2p_probe\": \"hang\"}},\n"
		  "  \"notes\": [\n"
		  "    {\"facts\": {\"topology\": [\"PIX\", \"PXB\"], \"peer_pci\": {\"exists\": "
		  "true}}, \"text\": \"The peer is {peer_pci}.\"},\n"
		  "    {\"facts\": {\"nvml\": \"unavailable\"}, \"text\": \"No NVML.\"},\n"
		  "    {\"facts\": {\"peers_enabled\": {\"gte\": 2}, \"peer_access_enabled\": "
		  "true}, \"text\": \"{peers_enabled} "
		  "peers, {peer_access_enabled}.\"}\n"
		  "  ],\n"));
	const struct p2pg_rule *r = p2pg_ruleset_find(rs, "t/hang");
	check(r != NULL);
	struct p2pg_facts facts = {0};
	p2pg_facts_set_str(&facts, "p2p_probe", "hang");
	char *text = p2pg_rule_root_cause_for(r, &facts);
	check_str(text, "Root cause.");
	free(text);
	p2pg_facts_set_str(&facts, "topology", "PXB");
	p2pg_facts_set_str(&facts, "peer_pci", "0000:1c:00.0");
	p2pg_facts_set_int(&facts, "peers_enabled", 3);
	p2pg_facts_set_bool(&facts, "peer_access_enabled", true);
	text = p2pg_rule_root_cause_for(r, &facts);
	check_str(text, "Root cause. The peer is 0000:1c:00.0. 3 peers, true.");
	free(text);
	text = p2pg_rule_root_cause_for(r, NULL);
	check_str(text, "Root cause.");
	free(text);
	check(p2pg_rule_root_cause_for(NULL, &facts) == NULL);
	check(p2pg_rule_needs_evidence(r));
	p2pg_ruleset_free(rs);
}

int main(void)
{
	RUN(test_messages);
	RUN(test_reading);
	RUN(test_frameworks);
	RUN(test_context);
	RUN(test_anchored);
	RUN(test_calls_in_words);
	RUN(test_framework_folders);
	RUN(test_triage_last);
	RUN(test_triage_by_status);
	RUN(test_triage_legacy_numbers);
	RUN(test_continued_message);
	RUN(test_notes);
	return test_failures ? 1 : 0;
}
