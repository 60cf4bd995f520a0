"""The `cardinal` subcommands, one module each (`explain`, `certify`, ...): the command's flags
(`_add_NAME`, called by `cardinal.verify.cli.build_parser`), its handler and its own helpers;
`common` holds what several commands share. No re-exports: import from the defining module.
"""
