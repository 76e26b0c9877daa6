# `triad quantize` end to end against PyPI gguf (bit-exact blocks, dequantization bounds, mix
# rules, error handling) and quantized stories260K models that run.
triad_pytest(quantize_cli quant)
set_property(TEST quantize_cli APPEND PROPERTY ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
