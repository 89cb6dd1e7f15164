"""Loading a model directory with Hugging Face transformers, shared by the GPU check's PyTorch
scripts (hf_static_baseline.py, torch_peer.py), which run from the repository as
`python3 bench/gpu/NAME.py` and so import this file by its name."""
import sys


def load_model(path, dtype, device):
    """The model in `path` in `dtype` on `device`, in eval mode. Raises RuntimeError naming the
    last error when transformers loads it no way; warns on stderr of weights the file lacks."""
    from transformers import AutoModelForCausalLM
    # transformers >= 4.56 takes dtype=, older versions only torch_dtype=; and not every
    # version/model accepts attn_implementation="sdpa".
    last_error = None
    for kwargs in ({"dtype": dtype, "attn_implementation": "sdpa"},
                   {"torch_dtype": dtype, "attn_implementation": "sdpa"},
                   {"dtype": dtype}, {"torch_dtype": dtype}):
        try:
            model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True,
                                                               **kwargs)
            break
        except Exception as e:  # noqa: BLE001 - reported below if every variant fails
            last_error = e
    else:
        raise RuntimeError(f"transformers could not load the model in {path}: {last_error}")
    # Weights missing from the file would be silently randomly initialized; say so.
    if info.get("missing_keys"):
        print(f"warning: weights not in {path}: {sorted(info['missing_keys'])}", file=sys.stderr)
    return model.to(device=device, dtype=dtype).eval()
