/* SPDX-License-Identifier: MIT */
/* The guard-facing subcommands (run, report, recover, topo); same conventions as commands.h. */
#pragma once

/* p2pguard run [--db PATH] [--mode MODE] [--pairs PAIRS] [--record all|summary] [--] CMD [ARG...]
 */
int p2pg_cmd_run(int argc, char **argv);

/* p2pguard report [DATABASE] */
int p2pg_cmd_report(int argc, char **argv);

/* p2pguard recover [DATABASE] */
int p2pg_cmd_recover(int argc, char **argv);

/* p2pguard trace [DATABASE] [-o FILE] */
int p2pg_cmd_trace(int argc, char **argv);

/* p2pguard metrics [DATABASE] [-o FILE] [--listen ADDR] */
int p2pg_cmd_metrics(int argc, char **argv);

/* p2pguard merge OUT.db IN.db... */
int p2pg_cmd_merge(int argc, char **argv);

/* p2pguard topo [--db PATH] [--bytes N] [--no-record] [--json] */
int p2pg_cmd_topo(int argc, char **argv);
