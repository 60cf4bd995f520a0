"""Model files by type, read as chains of affine maps and activations (`chain`) that
`cardinal.network.Network` assembles, and written: ONNX (`onnx_io`), torch (`torch_io`), and the
dispatch by file type (`loaders`). Part of the core: nothing here imports the engines or the
application, and nothing here runs pickled code.
"""
