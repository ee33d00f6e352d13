import Foundation

/// A stage that can merge with the stages after it into one faster stage.
///
/// When a pipeline is built, the optimizer offers each fusible stage the stages that follow it; the
/// stage returns a merged stage and how many of the following stages it absorbed, or `nil`. The
/// decoder uses this to load images at reduced size when a resize follows (shrink-on-load),
/// optionally across a relative crop. The merged stage must produce the same output type as the
/// last stage it replaces, and nearly the same pixels; its `kind` joins the kinds it replaced with
/// `+` so events show the fusion.
///
/// ```swift
/// extension MyDecoder: FusibleStage {
///   func fused(with following: ArraySlice<AnyStage>) -> FusedStage? {
///     guard let resize = following.first?.base as? MyResizer else { return nil }
///     let merged = MyThumbnailer(decoder: self, resizer: resize)
///     return FusedStage(AnyStage(merged, kind: "decode+resize", identifier: merged.identifier,
///                                fusedKinds: ["decode", "resize"]), absorbing: 1)
///   }
/// }
/// ```
package protocol FusibleStage: Stage {
  /// The stage replacing `self` and the first `absorbed` stages of `following`, or `nil`.
  func fused(with following: ArraySlice<AnyStage>) -> FusedStage?
}

/// The result of fusing: the merged stage and how many following stages it absorbed.
package struct FusedStage: Sendable {
  public var stage: AnyStage
  public var absorbed: Int

  public init(_ stage: AnyStage, absorbing absorbed: Int) {
    self.stage = stage
    self.absorbed = absorbed
  }
}
