/*
 * decl_cli.h - `codepod declarations TOOLS.json`: the declarations of a tools
 * file (broker/decl.h renders them) on stdout.
 */
#ifndef CLI_DECL_CLI_H
#define CLI_DECL_CLI_H

/**
 * cli_declarations() - `codepod declarations TOOLS.json`.
 * @path: the tools file, {"tools":[...]} or [...]; "-" reads stdin; NULL
 *        prints the usage.
 *
 * Prints the declarations on stdout, or a message on stderr.
 * Return: the exit status: 0, 1 on a bad file or a render error, 2 on usage.
 */
int cli_declarations(const char *path);

#endif
