/*
 * decl_cli.c - `codepod declarations TOOLS.json`: the declarations of a tools
 * file on stdout (the file format of broker/cmdtool.h, or a bare array).
 */
#include "broker/decl.h"
#include "cli/decl_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_declarations(const char *path)
{
	json_error_t jerr;
	struct cp_err err = { 0 };
	json_t *doc = NULL;
	char *out = NULL;
	int status = 1;

	if (!path) {
		fputs("usage: codepod declarations TOOLS.json   (- reads stdin)\n", stderr);
		return 2;
	}
	if (strcmp(path, "-") == 0)
		doc = json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr);
	else
		doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc) {
		if (jerr.line > 0)
			fprintf(stderr, "codepod: %s:%d:%d: %s\n", path, jerr.line, jerr.column, jerr.text);
		else
			fprintf(stderr, "codepod: %s\n", jerr.text);
		goto done;
	}
	if (broker_decl_render(doc, &out, &err) != 0) {
		fprintf(stderr, "codepod: %s: %s\n", path, err.msg);
		goto done;
	}
	if (fputs(out, stdout) == EOF || fflush(stdout) != 0) {
		perror("codepod: stdout");
		goto done;
	}
	status = 0;
done:
	free(out);
	json_decref(doc);
	return status;
}
