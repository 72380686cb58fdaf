/* SPDX-License-Identifier: MIT */
/*
 * A preload that does nothing: what the dynamic linker charges any LD_PRELOAD library, the floor
 * under scripts/bench-idle.sh's figures for libp2pguard.so.
 */
int p2pg_empty_preload(void);

int p2pg_empty_preload(void)
{
	return 0;
}
