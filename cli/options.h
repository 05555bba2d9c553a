/*
 * options.h - a subcommand's command line as tables: each option's name,
 * its argument, the field it sets and its line in --help. cli_parse() reads
 * argv with getopt_long built from the tables a subcommand takes, and
 * cli_help() prints the same tables, so what --help lists is what is parsed.
 *
 * An option's field is an offset into the struct its group fills (the
 * `base` given with the group), so the tables are constant and one table
 * serves every subcommand that takes it.
 *
 * Context: the command line, before the loop runs; getopt's globals.
 */
#ifndef CLI_OPTIONS_H
#define CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

enum cli_kind {
	CLI_STR,  /* const char *: the argument (given twice: the last one) */
	CLI_SET,  /* int: set to .min; takes no argument */
	CLI_UINT, /* unsigned: a decimal number from .min to .max */
	CLI_CALL, /* .call(base, argument) */
	CLI_HELP, /* cli_parse() stops and returns CLI_ASKED_HELP */
};

struct cli_opt {
	const char *name; /* without the leading "--"; NULL ends a table */
	const char *arg;  /* the argument's name in --help; NULL: takes none */
	enum cli_kind kind;
	size_t off;       /* the field, from the group's base: CLI_*_AT */
	unsigned long min, max;
	int (*call)(void *base, const char *arg); /* 0, or -1 once it said why */
	const char *help;
	char letter;      /* a short form (-h), or 0 */
	int secret;       /* names a file programs must not read: CLI_SECRET */
};

/* Marks an option whose argument names a file that holds a secret (a
 * token, a key, records of other conversations): cli_parse() registers
 * every such argument (cli_secret_files()), from which the local backend
 * hides them all from its sandbox, and --help says so. Every option taking
 * a file of codepod's that a program must not see carries it; a test walks
 * --help for `-file` options without it. */
#define CLI_SECRET .secret = 1

/* The offset of member @m of struct @S, which must have type @T: a table
 * that names a field of another type does not compile. */
#define CLI_AT(S, m, T) (offsetof(S, m) + 0 * sizeof(*(T **)0 = &((S *)0)->m))
#define CLI_STR_AT(S, m) .kind = CLI_STR, .off = CLI_AT(S, m, const char *)
#define CLI_SET_AT(S, m, v) .kind = CLI_SET, .off = CLI_AT(S, m, int), .min = (v)
#define CLI_UINT_AT(S, m, lo, hi) \
	.kind = CLI_UINT, .off = CLI_AT(S, m, unsigned), .min = (lo), .max = (hi)
#define CLI_END { .name = NULL }

struct cli_group {
	const char *title;          /* its heading in --help: who takes these */
	const struct cli_opt *opts; /* ends with CLI_END */
};

/* One group of a subcommand's, and the struct its fields are in. */
struct cli_use {
	const struct cli_group *group;
	void *base;
};

/* --help and -h, which every subcommand takes. */
extern const struct cli_group cli_help_group;

enum {
	CLI_PARSED = 0,
	CLI_ASKED_HELP = 1,
	CLI_BAD_VALUE = -1, /* the message is printed */
	CLI_BAD_USAGE = -2, /* an unknown option or a missing argument: getopt
	                     * printed which; the caller adds the usage */
};

/**
 * cli_parse() - read the options of @uses from @argv, the positional
 * arguments left in order at @argv[*args ..@argc).
 * @argv: argv[0] names the subcommand (getopt's messages start with it).
 * @given: @n entries, each set to the first option of that group on the
 *         command line, or NULL; may be NULL.
 *
 * Return: CLI_PARSED, CLI_ASKED_HELP, CLI_BAD_VALUE or CLI_BAD_USAGE.
 */
int cli_parse(int argc, char **argv, const struct cli_use *uses, size_t n,
              const struct cli_opt **given, int *args);

/* Most secret files a command line can name (more are refused). */
#define CLI_MAX_SECRETS 16

/**
 * cli_secret_files() - the arguments of every CLI_SECRET option cli_parse()
 * read so far (an option given twice: both), NULL-terminated. The strings
 * are argv's; the array is this module's, valid until the next cli_parse().
 */
const char *const *cli_secret_files(void);

/* The group's heading and one entry per option, its help wrapped; with
 * @base, a number's default (the field's value there, when in range). */
void cli_help(FILE *f, const struct cli_group *g, const void *base);

#endif
