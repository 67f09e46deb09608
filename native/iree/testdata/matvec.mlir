func.func @matvec(%x: tensor<1x4xf32>, %w: tensor<4x3xf32>) -> tensor<1x3xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<1x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<1x3xf32>) -> tensor<1x3xf32>
  %y = linalg.matmul ins(%x, %w : tensor<1x4xf32>, tensor<4x3xf32>) outs(%acc : tensor<1x3xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}
