/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/*
 * The length (2 to 4) of the well-formed UTF-8 sequence of several bytes at p, by RFC 3629's table
 * (no overlong forms, no surrogates, nothing past U+10FFFF); 0 when p begins none. Reads at most
 * up to the first byte that breaks the sequence, so a NUL-terminated string is never overrun.
 */
size_t p2pg_utf8_sequence(const unsigned char *p);
