#!/usr/bin/env python3
"""Makes the audio files of the speech tests and HF's log-mel features of each, the reference the
C++ audio front end (sdk/src/audio) is compared with. HF transformers' WhisperFeatureExtractor is
the oracle for the features; the files are written with Python's wave module (PCM16).

Per file AUDIO_DIR/<name>.wav: "samples.<name>" (the mono 16 kHz samples HF reads: the PCM
values / 32768, channels averaged in float64, other rates resampled by the Debian libsoxr the C++
side links, called through ctypes with SOXR_HQ: the resampler is not what is under test, the
pipeline around it is) and "features.<name>" (WhisperFeatureExtractor(feature_size=80)(samples,
sampling_rate=16000).input_features[0], [80, 3000]); "features128.<name>" for one file with 128
bins. Also files that are not audio, for the error tests.

usage: gen_audio_references.py AUDIO_DIR OUT.safetensors"""
import ctypes
import ctypes.util
import math
import pathlib
import sys
import wave

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import WhisperFeatureExtractor

RATE = 16000


def write_wav(path, channels, rate):
    """channels: float arrays in [-1, 1] (clipped, as a recorder saturates), one per channel."""
    pcm = np.stack([np.clip(np.round(np.asarray(c) * 32767.0), -32768, 32767) for c in channels],
                   axis=1).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(len(channels))
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return pcm


def soxr_resample(x, from_rate, to_rate):
    lib = ctypes.CDLL(ctypes.util.find_library("soxr") or "libsoxr.so.0")

    class IoSpec(ctypes.Structure):
        _fields_ = [("itype", ctypes.c_int), ("otype", ctypes.c_int), ("scale", ctypes.c_double),
                    ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]

    class QualitySpec(ctypes.Structure):
        _fields_ = [("precision", ctypes.c_double), ("phase_response", ctypes.c_double),
                    ("passband_end", ctypes.c_double), ("stopband_begin", ctypes.c_double),
                    ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]

    lib.soxr_io_spec.restype = IoSpec
    lib.soxr_quality_spec.restype = QualitySpec
    lib.soxr_oneshot.restype = ctypes.c_char_p
    io = lib.soxr_io_spec(0, 0)  # SOXR_FLOAT32_I both ways
    quality = lib.soxr_quality_spec(ctypes.c_ulong(4), ctypes.c_ulong(0))  # SOXR_HQ
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(math.ceil(len(x) * to_rate / from_rate), dtype=np.float32)
    done = ctypes.c_size_t(0)
    err = lib.soxr_oneshot(ctypes.c_double(from_rate), ctypes.c_double(to_rate), 1,
                           x.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(len(x)), None,
                           out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(len(out)),
                           ctypes.byref(done), ctypes.byref(io), ctypes.byref(quality), None)
    if err:
        raise SystemExit(f"libsoxr: {err.decode()}")
    return out[:done.value]


def main():
    audio_dir, out_path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    audio_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2024)

    def t(seconds, rate):
        return np.arange(int(seconds * rate)) / rate

    tone = lambda s, r: 0.5 * np.sin(2 * np.pi * 440 * t(s, r)) + 0.2 * np.sin(2 * np.pi * 1250 * t(s, r))
    files = {  # name: (rate, channels)
        "tone_16k": (RATE, [tone(3.0, RATE)]),
        "silence_16k": (RATE, [np.zeros(2 * RATE)]),
        "clipped_16k": (RATE, [2.0 * np.sin(2 * np.pi * 300 * t(2.0, RATE))]),
        "short_noise_16k": (RATE, [0.3 * rng.standard_normal(int(0.4 * RATE))]),
        "long_35s_16k": (RATE, [tone(35.0, RATE) * np.linspace(0.2, 1.0, 35 * RATE)]),
        "tone_8k": (8000, [tone(1.5, 8000)]),
        "stereo_44k": (44100, [tone(2.5, 44100), 0.4 * rng.standard_normal(int(2.5 * 44100))]),
    }
    extractor = WhisperFeatureExtractor(feature_size=80)
    extractor128 = WhisperFeatureExtractor(feature_size=128)
    out = {}
    for name, (rate, channels) in files.items():
        pcm = write_wav(audio_dir / f"{name}.wav", channels, rate)
        mono = (pcm.astype(np.float64) / 32768.0).mean(axis=1).astype(np.float32)
        samples = soxr_resample(mono, rate, RATE) if rate != RATE else mono
        out[f"samples.{name}"] = torch.from_numpy(samples.copy())
        out[f"features.{name}"] = torch.from_numpy(
            extractor(samples, sampling_rate=RATE, return_tensors="np").input_features[0])
        if name == "tone_16k":
            out[f"features128.{name}"] = torch.from_numpy(
                extractor128(samples, sampling_rate=RATE, return_tensors="np").input_features[0])
    # Files that are not (whole) audio.
    (audio_dir / "not_audio.wav").write_text("this is a text file, not a RIFF WAVE file\n")
    whole = (audio_dir / "tone_16k.wav").read_bytes()
    (audio_dir / "truncated.wav").write_bytes(whole[: len(whole) // 3])
    (audio_dir / "bad_header.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00"
                                               + b"\xff" * 16 + b"data\x00\x00\x00\x00")
    save_file({k: v.contiguous() for k, v in out.items()}, str(out_path))
    print(f"wrote {len(files)} audio files to {audio_dir} and their features to {out_path}")


if __name__ == "__main__":
    main()
