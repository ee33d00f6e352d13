/// One source, several outputs: a shared prefix (fetch, decode…) and named variants after it —
/// avatar sizes 64, 128 and 256, or a family of formats — as FastImageCache's format families.
///
/// Loaded through an ``ImageLoader``, the variants of a source share the prefix's in-flight work:
/// one transfer and one decode feed every variant. (With more than one variant, shrink-on-load
/// fusion across the prefix boundary is off, so that the decode is one and shared.) Each variant
/// may end with its own cache stage; a writer's `{variant}` placeholder is the variant's name.
///
/// ```swift
/// let avatars = PipelineVariants(
///   name: "avatar", prefix: Pipeline { Fetcher(); ImageDecoder() },
///   variants: [
///     ("64", Pipeline { Resizer(width: 64, height: 64, mode: .fill); ImageEncoder(.webp(quality: 80)) }),
///     ("128", Pipeline { Resizer(width: 128, height: 128, mode: .fill); ImageEncoder(.webp(quality: 80)) }),
///   ])
/// for (variant, operation) in avatars.load(ImageSource(url), with: loader) {
///   print(variant, try await operation.value.bytes.count)
/// }
/// ```
public struct PipelineVariants<Output: Sendable>: Sendable {
  /// A named variant: the whole pipeline from the source (prefix and the variant's own stages).
  public struct Variant: Sendable {
    public var name: String
    public var pipeline: Pipeline<ImageSource, Output>
  }

  public let name: String
  public let variants: [Variant]

  /// Variants made of a shared `prefix` and each variant's own stages.
  public init<Shared: Sendable>(
    name: String, prefix: Pipeline<ImageSource, Shared>, variants: [(String, Pipeline<Shared, Output>)]
  ) {
    self.name = name
    let fusion = variants.count <= 1 && prefix.graph.fusionEnabled
    self.variants = variants.map { variant in
      let graph = StageGraph.unchecked(name: name, stages: prefix.graph.stages + variant.1.graph.stages, fusion: fusion)
      return Variant(name: variant.0, pipeline: Pipeline<ImageSource, Output>(uncheckedGraph: graph))
    }
  }

  /// Variants loaded from a definition (see ``PipelineDefinition/loadSet(json:registry:context:defaultName:)``).
  package init(_ set: PipelineSet) throws(PipelineError) {
    name = set.name
    var variants: [Variant] = []
    for variant in set.variants {
      variants.append(Variant(name: variant.name ?? set.name, pipeline: try Pipeline(variant.graph)))
    }
    self.variants = variants
  }

  /// Starts every variant of `source` on `loader`; the variants share their prefix's work.
  public func load(
    _ source: ImageSource, with loader: ImageLoader, priority: LoadPriority = .normal, tag: String? = nil,
    options: RunOptions? = nil
  ) -> [(variant: String, operation: PipelineOperation<Output>)] {
    variants.map { variant in
      var run = options ?? loader.defaultRunOptions
      run.variant = variant.name
      return (variant.name, loader.load(source, pipeline: variant.pipeline, priority: priority, tag: tag, options: run))
    }
  }
}

/// What a pipeline definition describes: one graph, or one graph per variant (prefix + the
/// variant's stages). `name` of a variant is `nil` for a definition without variants.
package struct PipelineSet: Sendable {
  public struct Variant: Sendable {
    public var name: String?
    public var graph: StageGraph
  }

  public var name: String
  public var variants: [Variant]

  /// True when the definition declares variants.
  public var hasVariants: Bool { variants.contains { $0.name != nil } }
}

extension Pipeline {
  init(uncheckedGraph: StageGraph) { self.graph = uncheckedGraph }
}
