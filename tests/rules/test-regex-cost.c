/* SPDX-License-Identifier: MIT */
/*
 * What a rule's regex may cost regcomp(): the shipped rules fit the bounds with room, the hostile
 * forms are refused before regcomp() runs (interval forms {,n} and {n,} included, and runs of
 * optional parts), and what the bounds let through compiles in a few MB and milliseconds on a
 * thread whose stack is the guard's drainer's (256 KiB).
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <sys/resource.h>
#include <time.h>

#include "rules-builtin.h"
#include "rules-loader.h"
#include "rules-test.h"

static bool within(struct rules_regex_cost c)
{
	return c.size <= REGEX_MAX_SIZE && c.optional <= REGEX_MAX_OPTIONAL;
}

static void test_builtin(void)
{
	double most_size = 0, most_optional = 0;
	for (size_t k = 0; k < p2pg_builtin_rule_count; k++) {
		json_t *rule =
		    json_loadb(p2pg_builtin_rules[k].text, p2pg_builtin_rules[k].len, 0, NULL);
		const char *regex = json_string_value(json_object_get(rule, "regex"));
		if (regex) {
			struct rules_regex_cost c = rules_regex_cost(regex);
			most_size = fmax(most_size, c.size);
			most_optional = fmax(most_optional, c.optional);
		}
		json_decref(rule);
	}
	printf("# shipped rules: at most %.0f elements, %.0f optional parts\n", most_size,
	       most_optional);
	/* rules-loader.h's bounds leave a user's rule thirty times the room of the largest
	 * built-in one, and twelve times its optional parts. */
	check(most_size > 0 && most_size * 30 <= REGEX_MAX_SIZE);
	check(most_optional > 0 && most_optional * 12 <= REGEX_MAX_OPTIONAL);
}

static void test_counted(void)
{
	struct {
		const char *regex;
		double size, optional;
	} cases[] = {
	    {"abc", 3, 0},	  {"a?", 1, 1},
	    {"a*b", 2, 1},	  {"a+", 2, 1},
	    {"x{3}", 3, 0},	  {"x{2,5}", 5, 3},
	    {"x{,9}", 9, 9},	  {"x{2,}", 3, 1},
	    {"x{,}", 1, 1},	  {"(x?){4}", 4, 4},
	    {"(ab|c?){3}", 9, 3}, {"x{a}", 4, 0}, /* not an interval: characters */
	    {"[{,9}]", 1, 0},			  /* inside a bracket expression */
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct rules_regex_cost c = rules_regex_cost(cases[k].regex);
		if (c.size != cases[k].size || c.optional != cases[k].optional)
			fprintf(stderr, "%s: size %g optional %g, want %g and %g\n", cases[k].regex,
				c.size, c.optional, cases[k].size, cases[k].optional);
		check(c.size == cases[k].size && c.optional == cases[k].optional);
	}
}

/* Each of these took gigabytes, a minute, or more stack than the drainer has (issue 22). */
static void test_refused(void)
{
	char deep[200] = "";
	for (int k = 0; k < REGEX_MAX_DEPTH + 1; k++)
		strcat(deep, "(");
	strcat(deep, "x");
	for (int k = 0; k < REGEX_MAX_DEPTH + 1; k++)
		strcat(deep, ")");
	const char *hostile[] = {
	    "x((((((c){,9}){,9}){,9}){,9}){,9}){,9}",
	    "x(((((c){,9}){,9}){,9}){,9}){,9}",
	    "(x?){5000}",
	    "((x?){100}){100}",
	    "(((x?){20}){20}){25}",
	    "(x*){1000}",
	    "(x|y?){1000}",
	    "c+++++++++++++++++++++++++++",
	    "((x{2,}){2,}){1000}",
	    deep,
	};
	for (size_t k = 0; k < sizeof(hostile) / sizeof(hostile[0]); k++) {
		struct rules_regex_cost c = rules_regex_cost(hostile[k]);
		if (within(c))
			fprintf(stderr, "%s: size %g optional %g let through\n", hostile[k], c.size,
				c.optional);
		check(!within(c));
	}
}

struct compile {
	const char *regex;
	int rc;
	double ms;
};

static void *compile_main(void *arg)
{
	struct compile *c = arg;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	regex_t re;
	c->rc = regcomp(&re, c->regex, REG_EXTENDED | REG_ICASE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (c->rc == 0)
		regfree(&re);
	c->ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	return NULL;
}

/* What the bounds let through compiles within a drainer-sized stack, quickly. (The guard compiles
 * on an 8 MiB stack of its own: this is the margin.) */
static void test_at_the_bounds(void)
{
	const char *edge[] = {
	    "(x?){256}", "(x|y?){128}",	  "((x?){16}){16}", "(((x?){4}){8}){8}",
	    "x{10000}",	 "([a-z]?){256}", "(x*y*){128}",    "(ab?c?){128}",
	};
	for (size_t k = 0; k < sizeof(edge) / sizeof(edge[0]); k++) {
		struct rules_regex_cost cost = rules_regex_cost(edge[k]);
		check(within(cost));
		struct compile c = {edge[k], -1, 0};
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 256 << 10);
		pthread_t t;
		check_int(pthread_create(&t, &attr, compile_main, &c), 0);
		pthread_join(t, NULL);
		pthread_attr_destroy(&attr);
		printf("# %s: %.0f elements, %.0f optional: compiled in %.1f ms\n", edge[k],
		       cost.size, cost.optional, c.ms);
		check_int(c.rc, 0);
		check(c.ms < 2000);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("# the largest resident size of all of it: %ld MB\n", ru.ru_maxrss / 1024);
	check(ru.ru_maxrss < 100 * 1024);
}

int main(void)
{
	/* First, so that the resident size it reads is the bounds' compiles and not the shipped
	 * rules' text test_builtin parses (under AddressSanitizer freed memory stays quarantined,
	 * and that grows with every rule the knowledge base gains). */
	RUN(test_at_the_bounds);
	RUN(test_builtin);
	RUN(test_counted);
	RUN(test_refused);
	return test_failures ? 1 : 0;
}
