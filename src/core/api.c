/* SPDX-License-Identifier: MIT */
#include "api.h"

static const char *const api_names[] = {
#define P2PG_API_NAME(name) #name,
    P2PG_APIS(P2PG_API_NAME)
#undef P2PG_API_NAME
};

const char *p2pg_api_name(unsigned api)
{
	return api < P2PG_API_COUNT ? api_names[api] : "unknown";
}
