/* SPDX-License-Identifier: MIT */
/*
 * Cross-process and VMM mappings: whose memory, which device gains access, and the record of it
 * (src/record/mapping_record.h). Rows for everything that crosses a process or a device, counts
 * for a process's own memory on its own device. The driver tells whose memory an allocation
 * handle is (cuMemGetAllocationPropertiesFromHandle) and which device a pointer's memory is on;
 * what it cannot tell (this handle was imported, this range is a peer's) the guard remembers in
 * mapping_table.c. None of it holds a lock, before, during or after the real call.
 */
#include "mapping.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "driver.h"
#include "failure.h"
#include "guard.h"
#include "ipc_owners.h"
#include "mapping_record.h"
#include "mapping_table.h"
#include "notice.h"
#include "recorder.h"

#define MAX_ENDS    16 /* peer ranges one unmap can end (the rest are ended unseen) */
#define MAX_ACCESS  8  /* access descriptors of one cuMemSetAccess recorded one by one */
#define NO_DEVICE   (-1)
#define MAX_DEVICES 32 /* access bits */

static _Atomic uint32_t next_mapping_id;

static uint32_t new_mapping_id(void)
{
	return atomic_fetch_add_explicit(&next_mapping_id, 1, memory_order_relaxed) + 1;
}

static int pointer_device(CUdeviceptr p)
{
	int ordinal = NO_DEVICE;
	if (!p || p2pg_drv.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
						 p) != CUDA_SUCCESS)
		return NO_DEVICE;
	return ordinal;
}

static uint64_t range_size(CUdeviceptr p)
{
	size_t size = 0;
	if (p2pg_drv.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) !=
	    CUDA_SUCCESS)
		return 0;
	return size;
}

/* Both at once, in one driver call where the driver has it: an IPC open's owner and size cost
 * one lookup, not two (the guard's share of the call, about 1 us each). The plural call answers
 * defaults for memory it does not know, so its answer counts only for device memory. */
static void pointer_device_and_size(CUdeviceptr p, int *ret_device, uint64_t *ret_size)
{
	unsigned int type = 0;
	int ordinal = NO_DEVICE;
	size_t size = 0;
	CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				       CU_POINTER_ATTRIBUTE_RANGE_SIZE};
	void *data[] = {&type, &ordinal, &size};
	if (p && p2pg_drv.cuPointerGetAttributes &&
	    p2pg_drv.cuPointerGetAttributes(3, attrs, data, p) == CUDA_SUCCESS &&
	    type == CU_MEMORYTYPE_DEVICE && ordinal >= 0) {
		*ret_device = ordinal;
		*ret_size = size;
		return;
	}
	*ret_device = pointer_device(p);
	*ret_size = range_size(p);
}

/* The device an allocation handle's memory is on; its requested handle types in *types. */
static int handle_device(CUmemGenericAllocationHandle h, long long *types)
{
	CUmemAllocationProp prop;
	if (!p2pg_drv.cuMemGetAllocationPropertiesFromHandle ||
	    p2pg_drv.cuMemGetAllocationPropertiesFromHandle(&prop, h) != CUDA_SUCCESS)
		return NO_DEVICE;
	if (types)
		*types = (long long)prop.requestedHandleTypes;
	return prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop.location.id : NO_DEVICE;
}

static unsigned handle_kind(int cu_type)
{
	switch (cu_type) {
	case CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR:
		return P2PG_MAP_HANDLE_POSIX_FD;
	case CU_MEM_HANDLE_TYPE_FABRIC:
		return P2PG_MAP_HANDLE_FABRIC;
	case CU_MEM_HANDLE_TYPE_NONE:
		return P2PG_MAP_HANDLE_NONE;
	default:
		return P2PG_MAP_HANDLE_OTHER;
	}
}

static int lowest_device(uint32_t bits)
{
	return bits ? __builtin_ctz(bits) : NO_DEVICE;
}

static uint32_t device_bit(int device)
{
	return device >= 0 && device < MAX_DEVICES ? 1u << device : 0;
}

static void table_full(int limit, const char *what)
{
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		p2pg_notice("more than %d live %s: later ones are recorded without the link to "
			    "their unmap or close",
			    limit, what);
}

/* ---- records ---- */

struct row {
	unsigned event;
	int owner, accessor;
	uint64_t bytes, address;
	uint32_t mapping_id;
	unsigned handle_type;
	uint32_t bits; /* P2PG_MAP_F_* */
};

static uint64_t emit(const struct p2pg_mapping *m, int status, const struct row *w,
		     uint32_t *ret_serial)
{
	struct p2pg_record r = {
	    .started_ns = m->started_ns,
	    .host_ns = m->host_ns,
	    .bytes = w->bytes,
	    .stream = w->address,
	    .api = (uint16_t)m->api,
	    .kind = P2PG_REC_MAPPING,
	    .path = (uint8_t)w->event,
	    .status = status,
	    .src_device = (int16_t)w->owner,
	    .dst_device = (int16_t)w->accessor,
	    .flags = ((uint32_t)m->flags & P2PG_MAP_CALL_FLAGS) |
		     (w->handle_type << P2PG_MAP_HANDLE_SHIFT) | w->bits,
	    .value = (int32_t)w->mapping_id,
	};
	return p2pg_record(&r, ret_serial);
}

/* The devices other than accessor whose memory accessor reaches through live mappings. */
static int mapped_peers(int accessor)
{
	uint32_t owners = p2pg_map_ranges_owners_reached(device_bit(accessor));
	return __builtin_popcount(owners & ~device_bit(accessor));
}

static void failed(const struct p2pg_mapping *m, int status, const struct row *w, uint32_t serial,
		   uint64_t seq, long long alloc_types)
{
	const char *type = p2pg_map_handle_name(w->handle_type);
	bool fd_import = (m->op == P2PG_MAP_OP_IMPORT || m->op == P2PG_MAP_OP_POOL_IMPORT) &&
			 m->handle_type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	int fd = fd_import ? (int)(intptr_t)m->os_handle : -1;
	/* An import or a map gives no device access yet: the evidence is about the device the
	 * process works on. */
	int device = w->accessor >= 0 ? w->accessor : p2pg_current_device();
	char args[200];
	snprintf(args, sizeof(args),
		 "ptr=0x%llx size=%zu handle=0x%llx fd=%d type=%s flags=%llu owner=%d accessor=%d",
		 (unsigned long long)w->address, m->size, (unsigned long long)m->handle, fd,
		 type ? type : "none", m->flags, w->owner, w->accessor);
	struct p2pg_failure_mapping evidence = {
	    .handle_type = type,
	    .fd_import = fd_import,
	    .fd = fd,
	    .mapped_peers = mapped_peers(device),
	    .allocation_handle_types = alloc_types,
	};
	struct p2pg_failure f = {
	    .api = m->api,
	    .status = status,
	    .device = device,
	    .peer_device = w->owner,
	    .flags = m->flags,
	    .args = args,
	    .action = P2PG_ACTION_PASSED,
	    .serial = serial,
	    .seq = seq,
	    .started_ns = m->started_ns,
	    .peers_enabled = p2pg_peers_enabled(device),
	    .peer_access_enabled = -1,
	    .mapping = &evidence,
	};
	p2pg_failure_record(&f);
}

/* A row, and a failure's evidence when the call failed. */
static void row(const struct p2pg_mapping *m, int status, const struct row *w, long long types)
{
	uint32_t serial = 0;
	uint64_t seq = emit(m, status, w, &serial);
	if (status != CUDA_SUCCESS)
		failed(m, status, w, serial, seq, types);
}

/* A process's own memory on its own device: counted, not rowed. */
static void count(const struct p2pg_mapping *m, unsigned event, int device, uint64_t bytes)
{
	struct row w = {.event = event,
			.owner = device,
			.accessor = NO_DEVICE,
			.bytes = bytes,
			.bits = P2PG_MAP_F_COUNTED};
	emit(m, CUDA_SUCCESS, &w, NULL);
}

void p2pg_mapping_begin(struct p2pg_mapping *m)
{
	m->t0 = p2pg_now_ns();
	m->started_ns = p2pg_realtime_ns();
	m->owner = NO_DEVICE;
	/* What the call takes away: an unmapped range's device, a released handle's. */
	if (m->op == P2PG_MAP_OP_UNMAP) {
		m->owner = pointer_device(m->ptr);
	} else if (m->op == P2PG_MAP_OP_RELEASE) {
		struct p2pg_map_handle h;
		m->owner =
		    p2pg_map_handles_find(m->handle, &h) ? h.owner : handle_device(m->handle, NULL);
	}
}

static void ipc_get(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_EXPORT,
			.owner = pointer_device(m->ptr),
			.accessor = NO_DEVICE,
			.address = m->ptr,
			.handle_type = P2PG_MAP_HANDLE_IPC};
	if (status == CUDA_SUCCESS) {
		w.bytes = range_size(m->ptr);
		p2pg_ipc_owners_note(m->os_handle, w.owner);
	}
	row(m, status, &w, -1);
}

/* The device an IPC mapping's memory is on, as far as the importer can know it: the driver names
 * the mapping by the importing context's device, whatever device the memory is on (measured on two
 * H200s), so its answer says the owner only when the process sees one device; otherwise the
 * exporter's note of its handle says it (src/guard/ipc_owners.h), when the exporter is guarded. */
static int ipc_owner(int named, const void *handle)
{
	if (named >= 0 && p2pg_visible_devices() == 1)
		return named;
	int owner = p2pg_ipc_owners_find(handle);
	return owner >= 0 ? owner : NO_DEVICE;
}

static void ipc_open(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_IMPORT,
			.owner = NO_DEVICE,
			.accessor = p2pg_current_device(),
			.handle_type = P2PG_MAP_HANDLE_IPC,
			.bits = P2PG_MAP_F_CROSS_PROCESS};
	if (status == CUDA_SUCCESS && m->ret_ptr) {
		CUdeviceptr p = *m->ret_ptr;
		struct p2pg_map_range r;
		w.address = p;
		int named = NO_DEVICE;
		pointer_device_and_size(p, &named, &w.bytes);
		w.owner = ipc_owner(named, m->os_handle);
		if (p2pg_map_ranges_get(p, &r)) {
			/* The same handle again in one context: the driver hands the mapping back.
			 */
			w.mapping_id = r.mapping_id;
		} else {
			w.mapping_id = new_mapping_id();
			r = (struct p2pg_map_range){.base = p,
						    .size = w.bytes,
						    .owner = w.owner,
						    .access = device_bit(w.accessor),
						    .mapping_id = w.mapping_id,
						    .handle_type = P2PG_MAP_HANDLE_IPC,
						    .cross_process = true,
						    .refs = 1};
			if (!p2pg_map_ranges_add(&r))
				table_full(P2PG_MAP_RANGES, "peer mappings");
		}
	}
	row(m, status, &w, -1);
}

static void ipc_close(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_END,
			.owner = NO_DEVICE,
			.accessor = p2pg_current_device(),
			.address = m->ptr,
			.handle_type = P2PG_MAP_HANDLE_IPC};
	struct p2pg_map_range r;
	int put = status == CUDA_SUCCESS ? p2pg_map_ranges_put(m->ptr, &r) : -1;
	if (put >= 0) {
		w.bits = P2PG_MAP_F_CROSS_PROCESS;
		w.owner = r.owner;
		w.accessor = lowest_device(r.access);
		w.bytes = r.size;
		w.mapping_id = r.mapping_id;
		if (put == 0)
			w.bits |= P2PG_MAP_F_PARTIAL;
	} else if (status != CUDA_SUCCESS) {
		w.owner = pointer_device(m->ptr);
	}
	row(m, status, &w, -1);
}

static void export_handle(const struct p2pg_mapping *m, int status)
{
	long long types = -1;
	struct row w = {.event = P2PG_MAP_EXPORT,
			.owner = handle_device(m->handle, &types),
			.accessor = NO_DEVICE,
			.handle_type = handle_kind(m->handle_type)};
	row(m, status, &w, types);
}

static void import_handle(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_IMPORT,
			.owner = NO_DEVICE,
			.accessor = NO_DEVICE,
			.handle_type = handle_kind(m->handle_type),
			.bits = P2PG_MAP_F_CROSS_PROCESS};
	if (status == CUDA_SUCCESS && m->ret_handle) {
		struct p2pg_map_handle h = {.handle = *m->ret_handle,
					    .owner = handle_device(*m->ret_handle, NULL),
					    .mapping_id = new_mapping_id(),
					    .handle_type = (uint8_t)w.handle_type};
		w.owner = h.owner;
		w.mapping_id = h.mapping_id;
		if (!p2pg_map_handles_add(&h))
			table_full(P2PG_MAP_HANDLES, "imported handles");
	}
	row(m, status, &w, -1);
}

static void map(const struct p2pg_mapping *m, int status)
{
	struct p2pg_map_handle h;
	bool imported = p2pg_map_handles_find(m->handle, &h);
	struct row w = {
	    .event = P2PG_MAP_MAP, .accessor = NO_DEVICE, .bytes = m->size, .address = m->ptr};
	if (!imported) {
		w.owner = handle_device(m->handle, NULL);
		if (status == CUDA_SUCCESS) {
			count(m, P2PG_MAP_MAP, w.owner, m->size);
			return;
		}
		row(m, status, &w, -1);
		return;
	}
	w.owner = h.owner;
	w.handle_type = h.handle_type;
	w.bits = P2PG_MAP_F_CROSS_PROCESS;
	if (status == CUDA_SUCCESS) {
		w.mapping_id = new_mapping_id();
		struct p2pg_map_range r = {.base = m->ptr,
					   .size = m->size,
					   .owner = h.owner,
					   .mapping_id = w.mapping_id,
					   .handle_type = h.handle_type,
					   .cross_process = true,
					   .refs = 1};
		if (!p2pg_map_ranges_add(&r))
			table_full(P2PG_MAP_RANGES, "peer mappings");
	}
	row(m, status, &w, -1);
}

static void set_access(const struct p2pg_mapping *m, int status)
{
	struct p2pg_map_range r;
	bool known = p2pg_map_ranges_find(m->ptr, &r);
	int owner = known ? r.owner : pointer_device(m->ptr);
	struct row w = {
	    .event = P2PG_MAP_ACCESS, .owner = owner, .bytes = m->size, .address = m->ptr};
	if (known) {
		w.mapping_id = r.mapping_id;
		w.handle_type = r.handle_type;
		w.bits = r.cross_process ? P2PG_MAP_F_CROSS_PROCESS : 0;
	}
	if (status != CUDA_SUCCESS || !m->desc || m->count == 0) {
		w.accessor = m->desc && m->count ? m->desc[0].location.id : NO_DEVICE;
		row(m, status, &w, -1);
		return;
	}
	for (size_t k = 0; k < m->count; k++) {
		const CUmemAccessDesc *d = &m->desc[k];
		struct p2pg_mapping one = *m;
		one.flags = d->flags;
		w.accessor =
		    d->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? d->location.id : NO_DEVICE;
		bool crossing =
		    known ? (r.cross_process || owner != w.accessor)
			  : (owner != w.accessor && d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE);
		if (!crossing || k >= MAX_ACCESS) {
			count(&one, P2PG_MAP_ACCESS, owner, m->size);
			continue;
		}
		if (!known) {
			/* Another device given a process's own memory (PyTorch's enablePeerAccess
			 * on expandable segments): remembered, so that its unmap ends it. */
			w.mapping_id = new_mapping_id();
			r = (struct p2pg_map_range){.base = m->ptr,
						    .size = m->size,
						    .owner = owner,
						    .access = device_bit(w.accessor),
						    .mapping_id = w.mapping_id,
						    .refs = 1};
			known = true;
			if (!p2pg_map_ranges_add(&r))
				table_full(P2PG_MAP_RANGES, "peer mappings");
		} else if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
			p2pg_map_ranges_grant(m->ptr, m->size, device_bit(w.accessor));
		}
		emit(&one, status, &w, NULL);
	}
}

static void unmap(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_END,
			.owner = m->owner,
			.accessor = NO_DEVICE,
			.bytes = m->size,
			.address = m->ptr};
	if (status != CUDA_SUCCESS) {
		row(m, status, &w, -1);
		return;
	}
	struct p2pg_map_range ended[MAX_ENDS];
	int n = p2pg_map_ranges_take(m->ptr, m->size, ended, MAX_ENDS);
	if (n == 0)
		count(m, P2PG_MAP_END, m->owner, m->size);
	for (int k = 0; k < n; k++) {
		w.owner = ended[k].owner;
		w.accessor = lowest_device(ended[k].access);
		w.mapping_id = ended[k].mapping_id;
		w.handle_type = ended[k].handle_type;
		w.bits = ended[k].cross_process ? P2PG_MAP_F_CROSS_PROCESS : 0;
		emit(m, status, &w, NULL);
	}
}

static void release(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_END, .owner = m->owner, .accessor = NO_DEVICE};
	if (status != CUDA_SUCCESS) {
		row(m, status, &w, -1);
		return;
	}
	struct p2pg_map_handle h;
	if (p2pg_map_handles_release(m->handle, &h) != 1) {
		count(m, P2PG_MAP_END, m->owner, 0);
		return;
	}
	w.mapping_id = h.mapping_id;
	w.handle_type = h.handle_type;
	w.bits = P2PG_MAP_F_CROSS_PROCESS;
	emit(m, status, &w, NULL);
}

/* ---- stream-ordered pools ----
 * The guard does not follow a pool's allocations and frees (cudaMallocAsync, cudaFreeAsync), so an
 * imported pointer is recorded, not remembered as a live mapping: its end is not seen, and a range
 * that outlived it would misname later copies. A pool's own device is not asked for either (no
 * driver call tells it): the rows name the devices the calls name. */

static void pool_export(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_EXPORT,
			.owner = NO_DEVICE,
			.accessor = NO_DEVICE,
			.handle_type = handle_kind(m->handle_type)};
	row(m, status, &w, -1);
}

static void pool_import(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_IMPORT,
			.owner = NO_DEVICE,
			.accessor = p2pg_current_device(),
			.handle_type = handle_kind(m->handle_type),
			.bits = P2PG_MAP_F_CROSS_PROCESS};
	if (status == CUDA_SUCCESS)
		w.mapping_id = new_mapping_id();
	row(m, status, &w, -1);
}

static void pool_export_pointer(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_EXPORT, .accessor = NO_DEVICE, .address = m->ptr};
	pointer_device_and_size(m->ptr, &w.owner, &w.bytes);
	row(m, status, &w, -1);
}

static void pool_import_pointer(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_IMPORT,
			.owner = NO_DEVICE,
			.accessor = p2pg_current_device(),
			.bits = P2PG_MAP_F_CROSS_PROCESS};
	if (status == CUDA_SUCCESS && m->ret_ptr) {
		int named = NO_DEVICE;
		w.address = *m->ret_ptr;
		pointer_device_and_size(w.address, &named, &w.bytes);
		/* As for IPC: the name is the owner's only where the process sees one device. */
		w.owner = p2pg_visible_devices() == 1 ? named : NO_DEVICE;
		w.mapping_id = new_mapping_id();
	}
	row(m, status, &w, -1);
}

static void pool_set_access(const struct p2pg_mapping *m, int status)
{
	struct row w = {.event = P2PG_MAP_ACCESS, .owner = NO_DEVICE};
	if (status != CUDA_SUCCESS || !m->desc || m->count == 0) {
		w.accessor = m->desc && m->count ? m->desc[0].location.id : NO_DEVICE;
		row(m, status, &w, -1);
		return;
	}
	for (size_t k = 0; k < m->count && k < MAX_ACCESS; k++) {
		const CUmemAccessDesc *d = &m->desc[k];
		struct p2pg_mapping one = *m;
		one.flags = d->flags;
		w.accessor =
		    d->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? d->location.id : NO_DEVICE;
		emit(&one, status, &w, NULL);
	}
}

int p2pg_mapping_end(struct p2pg_mapping *m, int status)
{
	m->host_ns = p2pg_now_ns() - m->t0;
	switch (m->op) {
	case P2PG_MAP_OP_IPC_GET:
		ipc_get(m, status);
		break;
	case P2PG_MAP_OP_IPC_OPEN:
		ipc_open(m, status);
		break;
	case P2PG_MAP_OP_IPC_CLOSE:
		ipc_close(m, status);
		break;
	case P2PG_MAP_OP_EXPORT:
		export_handle(m, status);
		break;
	case P2PG_MAP_OP_IMPORT:
		import_handle(m, status);
		break;
	case P2PG_MAP_OP_MAP:
		map(m, status);
		break;
	case P2PG_MAP_OP_SET_ACCESS:
		set_access(m, status);
		break;
	case P2PG_MAP_OP_UNMAP:
		unmap(m, status);
		break;
	case P2PG_MAP_OP_RELEASE:
		release(m, status);
		break;
	case P2PG_MAP_OP_RETAIN:
		/* Not recorded: the same handle back, one reference more (an import's end is its
		 * last release). */
		if (status == CUDA_SUCCESS && m->ret_handle)
			p2pg_map_handles_retain(*m->ret_handle);
		break;
	case P2PG_MAP_OP_POOL_EXPORT:
		pool_export(m, status);
		break;
	case P2PG_MAP_OP_POOL_IMPORT:
		pool_import(m, status);
		break;
	case P2PG_MAP_OP_POOL_EXPORT_PTR:
		pool_export_pointer(m, status);
		break;
	case P2PG_MAP_OP_POOL_IMPORT_PTR:
		pool_import_pointer(m, status);
		break;
	case P2PG_MAP_OP_POOL_SET_ACCESS:
		pool_set_access(m, status);
		break;
	}
	return status;
}

int p2pg_mapping_owner(CUdeviceptr p)
{
	struct p2pg_map_range r;
	if (p2pg_map_ranges_live() == 0 || !p2pg_map_ranges_find(p, &r))
		return NO_DEVICE;
	return r.owner;
}

bool p2pg_mapping_usable_by(CUdeviceptr p, int device)
{
	struct p2pg_map_range r;
	if (p2pg_map_ranges_live() == 0 || !p2pg_map_ranges_find(p, &r))
		return true;
	return r.handle_type == P2PG_MAP_HANDLE_IPC || (r.access & device_bit(device));
}

bool p2pg_mapping_peer_path(CUdeviceptr p, int other_device)
{
	struct p2pg_map_range r;
	if (p2pg_map_ranges_live() == 0 || !p2pg_map_ranges_find(p, &r))
		return false;
	return r.owner >= 0 && r.owner != other_device && (r.access & device_bit(other_device));
}
