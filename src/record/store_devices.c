/* SPDX-License-Identifier: MIT */
/* A process's devices blob into the devices table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "store-private.h"

#define DEVICE_FIELDS 5

/* A decimal from 0 to max; -1 for "" (unknown); -2 for anything else. */
static long number(const char *s, long max)
{
	if (!*s)
		return -1;
	char *end;
	long v = strtol(s, &end, 10);
	return *end || v < 0 || v > max || end == s ? -2 : v;
}

#define MAX_DEVICES 64

/* devices.c lists the ordinals 0..n-1 in order, n the driver's device count (at most
 * MAX_DEVICES), the count the header holds too: an ordinal out of its place, or more devices
 * than the process has, would be a row for a device it never had. */
bool p2pg_store_devices_valid(const struct p2pg_spool_blob *b, int32_t devices)
{
	const char *f[MAX_DEVICES * DEVICE_FIELDS];
	if (b->device < 0 || b->device > MAX_DEVICES || (devices > 0 && b->device > devices))
		return false;
	int n = p2pg_store_blob_fields(b, f, MAX_DEVICES * DEVICE_FIELDS);
	if (n != b->device * DEVICE_FIELDS)
		return false;
	for (int k = 0; k < n; k += DEVICE_FIELDS)
		if (number(f[k], 65535) != k / DEVICE_FIELDS || number(f[k + 4], 0x7fffffff) == -2)
			return false;
	return true;
}

static void text_or_null(sqlite3_stmt *st, int index, const char *text)
{
	if (*text)
		sqlite3_bind_text(st, index, text, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, index);
}

int p2pg_store_import_devices(sqlite3 *db, int64_t process_id, const struct p2pg_spool_blob *b)
{
	const char *f[MAX_DEVICES * DEVICE_FIELDS];
	int n = p2pg_store_blob_fields(b, f, MAX_DEVICES * DEVICE_FIELDS);
	_cleanup_sqlite_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
			       "INSERT OR REPLACE INTO devices (process_id, ordinal, uuid, "
			       "pci_bus_id, name, physical_index) VALUES (?1,?2,?3,?4,?5,?6)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	for (int k = 0; k + DEVICE_FIELDS <= n; k += DEVICE_FIELDS) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, process_id);
		sqlite3_bind_int(st, 2, (int)number(f[k], 65535));
		text_or_null(st, 3, f[k + 1]);
		text_or_null(st, 4, f[k + 2]);
		text_or_null(st, 5, f[k + 3]);
		long index = number(f[k + 4], 0x7fffffff);
		if (index >= 0)
			sqlite3_bind_int64(st, 6, index);
		else
			sqlite3_bind_null(st, 6);
		if (sqlite3_step(st) != SQLITE_DONE)
			return -EIO;
	}
	return 0;
}
