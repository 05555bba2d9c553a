/*
 * options.c - getopt_long over a subcommand's option tables, and their
 * --help text.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

/* getopt_long's value for the i-th option: past every character. */
#define VAL_BASE 256

#define HELP_COL 30   /* where the help text starts */
#define HELP_WIDTH 79 /* the last column it may use */

static const struct cli_opt help_opts[] = {
	{ "help", NULL, CLI_HELP, .letter = 'h', .help = "this text" },
	CLI_END,
};
const struct cli_group cli_help_group = { "every command", help_opts };

/* Every CLI_SECRET argument read: the sandbox hides them all. */
static const char *secrets[CLI_MAX_SECRETS + 1];
static size_t nsecrets;

const char *const *cli_secret_files(void)
{
	return secrets;
}

static size_t count(const struct cli_opt *o)
{
	size_t n = 0;
	while (o[n].name)
		n++;
	return n;
}

static int set(const struct cli_opt *o, void *base, const char *arg)
{
	char *field = (char *)base + o->off;
	if (o->secret && arg) {
		if (nsecrets == CLI_MAX_SECRETS) {
			fprintf(stderr, "codepod: at most %d files holding secrets\n", CLI_MAX_SECRETS);
			return -1;
		}
		secrets[nsecrets++] = arg;
		secrets[nsecrets] = NULL;
	}
	switch (o->kind) {
	case CLI_STR:
		*(const char **)field = arg;
		return 0;
	case CLI_SET:
		*(int *)field = (int)o->min;
		return 0;
	case CLI_UINT: {
		char *end = NULL;
		unsigned long v = strtoul(arg, &end, 10);
		if (!*arg || *end || v < o->min || v > o->max) {
			fprintf(stderr, "codepod: --%s must be a number from %lu to %lu\n", o->name,
			        o->min, o->max);
			return -1;
		}
		*(unsigned *)field = (unsigned)v;
		return 0;
	}
	case CLI_CALL:
		return o->call(base, arg);
	case CLI_HELP:
		break;
	}
	return 0;
}

/* Where getopt_long's i-th option came from. */
struct slot {
	const struct cli_opt *opt;
	size_t use;
};

int cli_parse(int argc, char **argv, const struct cli_use *uses, size_t n,
              const struct cli_opt **given, int *args)
{
	size_t total = 0;
	for (size_t u = 0; u < n; u++)
		total += count(uses[u].group->opts);
	struct option *longopts = calloc(total + 1, sizeof *longopts);
	struct slot *slots = calloc(total + 1, sizeof *slots);
	*args = 1;
	if (!longopts || !slots) {
		free(longopts);
		free(slots);
		fputs("codepod: out of memory\n", stderr);
		return CLI_BAD_VALUE;
	}
	char shorts[8] = ""; /* the letters (only -h has one) */
	size_t nshort = 0, i = 0;
	for (size_t u = 0; u < n; u++) {
		if (given)
			given[u] = NULL;
		for (const struct cli_opt *o = uses[u].group->opts; o->name; o++, i++) {
			longopts[i] = (struct option){ o->name, o->arg ? required_argument : no_argument,
			                               NULL, VAL_BASE + (int)i };
			slots[i] = (struct slot){ o, u };
			if (o->letter && nshort + 1 < sizeof shorts)
				shorts[nshort++] = o->letter;
		}
	}
	int rc = CLI_PARSED, c;
	optind = 1;
	nsecrets = 0;
	secrets[0] = NULL;
	while (rc == CLI_PARSED && (c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
		size_t at = total;
		if (c >= VAL_BASE && (size_t)(c - VAL_BASE) < total)
			at = (size_t)(c - VAL_BASE);
		else if (c != '?')
			for (size_t k = 0; k < total; k++)
				if (slots[k].opt->letter == c)
					at = k;
		if (at == total) { /* '?': getopt said what is wrong */
			rc = CLI_BAD_USAGE;
			break;
		}
		const struct cli_opt *o = slots[at].opt;
		if (given && !given[slots[at].use])
			given[slots[at].use] = o;
		if (o->kind == CLI_HELP)
			rc = CLI_ASKED_HELP;
		else if (set(o, uses[slots[at].use].base, optarg))
			rc = CLI_BAD_VALUE;
	}
	*args = optind;
	free(longopts);
	free(slots);
	return rc;
}

/* @text from column HELP_COL, its words wrapped before HELP_WIDTH and
 * continued at HELP_COL; ends the line. */
static void wrap(FILE *f, const char *text)
{
	size_t col = HELP_COL;
	int fresh = 1;
	text += strspn(text, " ");
	while (*text) {
		size_t w = strcspn(text, " ");
		if (!fresh && col + 1 + w > HELP_WIDTH) {
			fprintf(f, "\n%*s", HELP_COL, "");
			col = HELP_COL;
			fresh = 1;
		}
		if (!fresh) {
			fputc(' ', f);
			col++;
		}
		fwrite(text, 1, w, f);
		col += w;
		fresh = 0;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

void cli_help(FILE *f, const struct cli_group *g, const void *base)
{
	fprintf(f, "\n%s:\n", g->title);
	for (const struct cli_opt *o = g->opts; o->name; o++) {
		char head[96], text[640];
		size_t hn = 0;
		if (o->letter)
			hn = (size_t)snprintf(head, sizeof head, "-%c, ", o->letter);
		snprintf(head + hn, sizeof head - hn, "--%s%s%s", o->name, o->arg ? " " : "",
		         o->arg ? o->arg : "");
		size_t col = 2 + strlen(head);
		fprintf(f, "  %s", head);
		if (col + 2 > HELP_COL) { /* a long one: its help on the next line */
			fputc('\n', f);
			col = 0;
		}
		fprintf(f, "%*s", (int)(HELP_COL - col), "");
		unsigned v = 0;
		if (base && o->kind == CLI_UINT)
			memcpy(&v, (const char *)base + o->off, sizeof v);
		if (base && o->kind == CLI_UINT && v >= o->min && v <= o->max)
			snprintf(text, sizeof text, "%s (default %u)", o->help, v);
		else
			snprintf(text, sizeof text, "%s%s", o->help,
			         o->secret ? "; hidden from programs" : "");
		wrap(f, text);
	}
}
