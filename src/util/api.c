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

const char *p2pg_action_name(unsigned action)
{
	switch (action) {
	case P2PG_ACTION_ABSORBED:
		return "absorbed";
	case P2PG_ACTION_STAGED:
		return "staged";
	case P2PG_ACTION_REPORTED:
		return "reported";
	default:
		return "passed";
	}
}
