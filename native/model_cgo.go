//go:build cgo

package native

/*
#include <stdlib.h>
#include "model.h"
#include "arch.h"

// dq_rows writes rows [0, w->rows) of w as float32 (portable dequantizer).
static void dq_rows(const pm_weight *w, float *out) {
	pm_dequant_fn f = pm_dequant(w->type, 0);
	for (int r = 0; r < w->rows; r++)
		f(out + (size_t)r * w->cols, pm_weight_row(w, r), w->cols);
}
*/
import "C"

import (
	"strconv"
	"unsafe"
)

// ReadModelFile loads the GGUF model at path with the C loader, copies out
// what it read and frees it. Errors are *Error with the loader's message
// ("<path>: tensor blk.3.ffn_up.weight: missing").
func ReadModelFile(path string) (*ModelFile, error) {
	var m C.pm_model
	if err := loadModel(path, &m); err != nil {
		return nil, err
	}
	defer C.pm_model_free(&m)
	return modelFile(&m), nil
}

// loadModel loads the GGUF model at path into m with the C loader; on
// success the caller frees m with pm_model_free. Errors are *Error with the
// loader's message.
func loadModel(path string, m *C.pm_model) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if rc := C.pm_model_load(cpath, m, &msg[0], C.size_t(len(msg))); rc != C.PM_OK {
		return &Error{Status: Status(rc), Msg: C.GoString(&msg[0])}
	}
	return nil
}

// ParseModel is ReadModelFile on bytes held in memory (the loader's
// pm_model_load_mem, on a C copy of b): any b is safe input. Messages
// have no path prefix.
func ParseModel(b []byte) (*ModelFile, error) {
	var buf unsafe.Pointer
	if len(b) > 0 {
		buf = C.CBytes(b)
		defer C.free(buf)
	}
	var m C.pm_model
	var msg [512]C.char
	if rc := C.pm_model_load_mem(buf, C.size_t(len(b)), &m, &msg[0], C.size_t(len(msg))); rc != C.PM_OK {
		return nil, &Error{Status: Status(rc), Msg: C.GoString(&msg[0])}
	}
	defer C.pm_model_free(&m)
	return modelFile(&m), nil
}

// LoadModelInfo describes the GGUF model at path as the C loader reads it.
func LoadModelInfo(path string) (ModelInfo, error) {
	f, err := ReadModelFile(path)
	if err != nil {
		return ModelInfo{}, err
	}
	return f.Info, nil
}

func cbytes(p unsafe.Pointer, n uint64) []byte {
	if n == 0 {
		return []byte{}
	}
	return append([]byte(nil), unsafe.Slice((*byte)(p), n)...)
}

func modelFile(m *C.pm_model) *ModelFile {
	f := &ModelFile{
		Info: ModelInfo{
			Name:          C.GoString(&m.name[0]),
			Arch:          C.GoString(&m.arch[0]),
			Dim:           int(m.dim),
			Layers:        int(m.n_layers),
			Heads:         int(m.n_heads),
			KVHeads:       int(m.n_kv_heads),
			FFN:           int(m.ffn_dim),
			Vocab:         int(m.vocab),
			ContextLength: int(m.ctx_len),
			BOS:           int32(m.bos_id),
			EOS:           int32(m.eos_id),
			Pad:           int32(m.pad_id),
		},
		HeadDim:       int(m.head_dim),
		RMSEps:        float32(m.rms_eps),
		RopeTheta:     float32(m.rope_theta),
		TiedOutput:    m.tied_output != 0,
		RopeFreqScale: float32(m.rope_freq_scale),
		RopeNeox:      m.rope_type == C.PM_ROPE_NEOX,
		F16:           m.f16 != 0,
		TypeMask:      uint64(m.type_mask),
		MatrixBytes:   uint64(m.matrix_bytes),
		Alignment:     uint32(m.alignment),
		Tensors:       int(m.n_file_tensors),
	}
	if m.rope_freqs != nil {
		f.RopeFactors = append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(m.rope_freqs)), int(m.head_dim)/2)...)
	}
	if n := int(m.n_tokens); n > 0 {
		texts := unsafe.Slice(m.tok_text, n)
		lens := unsafe.Slice(m.tok_len, n)
		f.Info.Tokens = make([]string, n)
		for i := range f.Info.Tokens {
			f.Info.Tokens[i] = string(cbytes(unsafe.Pointer(texts[i]), uint64(lens[i])))
		}
	}
	if m.chat_template != nil {
		f.Info.ChatTemplate = string(cbytes(unsafe.Pointer(m.chat_template), uint64(m.chat_template_len)))
	}
	if n := int(m.n_kv); n > 0 {
		kvs := unsafe.Slice(m.kv, n)
		f.Meta = make([]MetaKV, n)
		for i, kv := range kvs {
			f.Meta[i] = MetaKV{
				Key:   string(cbytes(unsafe.Pointer(kv.key), uint64(kv.key_len))),
				Type:  uint32(kv._type),
				Value: cbytes(unsafe.Pointer(kv.value), uint64(kv.value_len)),
			}
		}
	}
	return f
}

// ReadModelWeights loads the model at path with the C loader and returns a
// copy of every weight it points the engine at, by GGUF tensor name
// (token_embd.weight, blk.N.attn_q.weight, …, output_norm.weight, and
// output.weight unless the output is tied; biases, q/k norms and rope_freqs
// when the model has them), as float32: dequantized as stored. It exists so
// tests can check the loader located each tensor.
func ReadModelWeights(path string) (map[string][]float32, error) {
	var m C.pm_model
	if err := loadModel(path, &m); err != nil {
		return nil, err
	}
	defer C.pm_model_free(&m)
	dim, ffn, vocab := int(m.dim), int(m.ffn_dim), int(m.vocab)
	q, kv := int(m.n_heads*m.head_dim), int(m.n_kv_heads*m.head_dim)
	w := make(map[string][]float32)
	get := func(name string, p *C.float, n int) {
		w[name] = append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(p)), n)...)
	}
	getW := func(name string, m C.pm_weight, n int) {
		if int(m.rows)*int(m.cols) != n {
			n = 0 // the engine's check reports it; here the shape shows as empty
		}
		out := make([]float32, n)
		if n > 0 {
			C.dq_rows(&m, (*C.float)(unsafe.Pointer(&out[0])))
		}
		w[name] = out
	}
	getW("token_embd.weight", m.tok_embd, vocab*dim)
	for l := 0; l < int(m.n_layers); l++ {
		L := &m.layers[l]
		b := "blk." + strconv.Itoa(l) + "."
		get(b+"attn_norm.weight", L.attn_norm, dim)
		getW(b+"attn_q.weight", L.wq, q*dim)
		getW(b+"attn_k.weight", L.wk, kv*dim)
		getW(b+"attn_v.weight", L.wv, kv*dim)
		if L.bq != nil {
			get(b+"attn_q.bias", L.bq, q)
			get(b+"attn_k.bias", L.bk, kv)
			get(b+"attn_v.bias", L.bv, kv)
		}
		if L.q_norm != nil {
			get(b+"attn_q_norm.weight", L.q_norm, int(m.head_dim))
			get(b+"attn_k_norm.weight", L.k_norm, int(m.head_dim))
		}
		getW(b+"attn_output.weight", L.wo, dim*q)
		get(b+"ffn_norm.weight", L.ffn_norm, dim)
		getW(b+"ffn_gate.weight", L.w_gate, ffn*dim)
		getW(b+"ffn_up.weight", L.w_up, ffn*dim)
		getW(b+"ffn_down.weight", L.w_down, dim*ffn)
	}
	get("output_norm.weight", m.out_norm, dim)
	if m.rope_freqs != nil {
		get("rope_freqs.weight", m.rope_freqs, int(m.head_dim)/2)
	}
	if m.tied_output == 0 {
		getW("output.weight", m.output, vocab*dim)
	} else if m.output.data != m.tok_embd.data {
		return nil, &Error{Status: StatusInternal, Msg: "BUG: tied output does not point at token_embd"}
	}
	return w, nil
}
