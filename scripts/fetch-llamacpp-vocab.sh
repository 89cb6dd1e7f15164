#!/usr/bin/env bash
# Fetches, once, the real tokenizer vocabularies and chat templates that llama.cpp keeps for its
# own tests, from the sdist of the PyPI package llama-cpp-python (pinned in
# scripts/lib/llamacpp.sh; it vendors llama.cpp): vendor/llama.cpp/models/ggml-vocab-NAME.gguf
# (a vocabulary's GGUF metadata, no weights) with its test strings (.gguf.inp) and the ids
# Hugging Face's tokenizers gives them (.gguf.out, written by llama.cpp's
# convert_hf_to_gguf_update.py with add_special_tokens=False), and models/templates/*.jinja.
# tests/model/llamacpp_vocab_test.cc reads the vocabularies; scripts/fixtures/
# chat_template_fixtures.py reads the templates. Only the files listed below are unpacked (about
# 60 MB), into .cache/llamacpp-vocab (or $CONVOY_LLAMACPP_VOCAB_DIR), laid out as under
# vendor/llama.cpp/models; the sdist stays in $LLAMACPP_DIR (/var/tmp/convoy-llamacpp). Prints the
# folder's path on stdout.
# Exit 0: the files are there (fetched now or before); 1: they could not be fetched (on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/llamacpp.sh

# The vocabularies convoy's tokenizer implements (tested id for id) and a few it refuses (tested
# to be refused by name).
vocabs=(phi-3 llama-spm gemma-4 llama-bpe qwen2 gpt-2 starcoder refact qwen35 mpt bert-bge)
templates=(google-gemma-2-2b-it microsoft-Phi-3.5-mini-instruct
  mistralai-Mistral-Nemo-Instruct-2407 meta-llama-Llama-3.1-8B-Instruct
  meta-llama-Llama-3.2-3B-Instruct meta-llama-Llama-3.3-70B-Instruct Qwen-Qwen2.5-7B-Instruct
  Qwen-Qwen3-0.6B HuggingFaceTB-SmolLM3-3B)

target=${CONVOY_LLAMACPP_VOCAB_DIR:-.cache/llamacpp-vocab}
files=()
for v in "${vocabs[@]}"; do
  files+=("ggml-vocab-$v.gguf")
  [ "$v" = bert-bge ] || [ "$v" = mpt ] || files+=("ggml-vocab-$v.gguf.inp" "ggml-vocab-$v.gguf.out")
done
for t in "${templates[@]}"; do files+=("templates/$t.jinja"); done
# The stamp names the sdist and the files: a new list or version unpacks again.
stamp_text="llama-cpp-python==$llamacpp_version ${files[*]}"

complete() {
  [ "$(cat "$target/.stamp" 2>/dev/null)" = "$stamp_text" ] || return 1
  local f
  for f in "${files[@]}"; do [ -s "$target/$f" ] || return 1; done
}
if complete; then
  echo "$target"
  exit 0
fi
fetch_llamacpp_sdist fetch-llamacpp-vocab || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
members=()
for f in "${files[@]}"; do members+=("$llamacpp_top/vendor/llama.cpp/models/$f"); done
if ! tar -xzf "$llamacpp_sdist" -C "$work" "${members[@]}"; then
  echo "fetch-llamacpp-vocab: $llamacpp_sdist lacks some of: ${files[*]}" >&2
  exit 1
fi
mkdir -p "$target/templates"
for f in "${files[@]}"; do
  mv "$work/$llamacpp_top/vendor/llama.cpp/models/$f" "$target/$f"
done
echo "$stamp_text" >"$target/.stamp"
echo "$target"
