# Golden tests: the `triad` binary against the independent numpy reference
# (tests/reference/ref_model.py), plus the reference's own self-tests.
#   reference_selftest  building blocks, K-quant encoders, synthetic generator (no binary)
#   reference_data      reference vs llama.cpp tokenizer vectors and stories260K sanity
#   golden_synthetic    random-weight llama/qwen2/qwen3/gemma3 models, every weight type
#   golden_stories      stories260K logits and greedy continuation
#   golden_imatrix      `triad imatrix` statistics vs numpy sums over the same chunks
#   golden_kld          KL divergence figures vs numpy over the same stored base log-probs
#   golden_online       --weight-type fp8_e4m3 / int8 vs the reference's own load-time rounding
#   golden_gemma        the default Gemma 3 270M Q4_K_M (skips when absent from TRIAD_MODELS_DIR)
#   golden_convert      `triad convert` of random Hugging Face folders vs a numpy pass over their
#                       safetensors, and their tokenizers vs PyPI tokenizers
#   golden_embeddings   all-MiniLM-L6-v2 converted and served: 200 inputs' token ids vs PyPI
#                       tokenizers and their embeddings vs a numpy BERT (tests/reference/bert_ref.py)
#   golden_nomic_bert   a random-weight NomicBertModel folder converted and served vs a numpy
#                       nomic-bert (tests/reference/nomic_bert_ref.py)
# Reference results and the synthetic models are cached in <build>/ref-cache (keyed by model
# sha256, inputs and the reference's source), so only a cold first run pays for the reference.
triad_pytest(reference_selftest reference/test_reference.py)
triad_pytest(reference_data reference/test_reference_data.py)
triad_pytest(golden_synthetic golden/test_synthetic.py)
triad_pytest(golden_stories golden/test_stories.py)
triad_pytest(golden_imatrix golden/test_imatrix.py)
triad_pytest(golden_kld golden/test_kld.py)
triad_pytest(golden_online golden/test_online.py)
triad_pytest(golden_gemma golden/test_gemma.py)
triad_pytest(golden_convert golden/test_convert.py)
triad_pytest(golden_embeddings golden/test_embeddings.py)
triad_pytest(golden_nomic_bert golden/test_nomic_bert.py)

foreach(t reference_selftest reference_data golden_synthetic golden_stories golden_imatrix golden_kld golden_online golden_gemma golden_embeddings golden_nomic_bert)
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
    "TRIAD_REF_CACHE=${CMAKE_BINARY_DIR}/ref-cache" "OPENBLAS_NUM_THREADS=1"
    "PYTHONDONTWRITEBYTECODE=1")
  set_property(TEST ${t} APPEND PROPERTY LABELS golden)
endforeach()
# A cold cache makes the numpy reference read and dequantize the 270M model (about a minute).
set_tests_properties(golden_gemma PROPERTIES TIMEOUT 900)
