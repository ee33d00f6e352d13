@_exported import DarkroomCache
@_exported import DarkroomCore
@_exported import DarkroomCurl
@_exported import DarkroomVips

/// Darkroom's front door: the standard stage registry and one-time set-up.
///
/// ```swift
/// import Darkroom
///
/// try Darkroom.bootstrap()
/// let graph = try PipelineDefinition.load(contentsOf: "thumbnail.json", registry: Darkroom.standardRegistry)
/// let operation = PipelineExecutor().start(graph, input: ImageSource("photo.jpg"), as: (any Sendable).self)
/// print(try await operation.value)
/// ```
public enum Darkroom {
  /// Initialises the image library (once per process; later calls do nothing). Stages also do
  /// this on first use; calling it at start-up surfaces a broken installation early.
  /// `vipsConcurrency` sets libvips' threads per image (default 1: Darkroom parallelises across
  /// images).
  public static func bootstrap(vipsConcurrency: Int = 1) throws(PipelineError) {
    Vips.requestConcurrency(vipsConcurrency)
    try Vips.initialize()
  }

  /// The built-in stage kinds: `fetch`, `decode`, `crop`, `resize`, `rotate`, `flip`, `grayscale`, `blur`,
  /// `sharpen`, `modulate`, `flatten`, `extend`, `round`, `trim`, `overlay`, `metadata`, `encode`, `write`, `cache`, `notify`, `save`.
  public static var standardRegistry: StageRegistry {
    var registry = StageRegistry()
    registry.register(
      "fetch",
      summary:
        "Reads the source: a local path or file:// URL (confined to `root`), an http(s) URL through libcurl (bounded, SSRF-guarded), or a data: URL.",
      options: FetchOptions.self
    ) { options, context in
      // The file's root narrows the runner's: a path must be inside both (CA files too). A
      // pipeline checked for queue workers (`darkroom enqueue`) names the workers' CA files, which
      // they read beneath their own --root: this machine does not read them.
      let roots = [options.root, context.allowedRoot].compactMap { $0 }
      let forWorkers = context.validatingOnly && context.confinesFiles
      let http = try options.httpOptions(roots: roots, readingCertificates: !forWorkers)
      return Fetcher(
        maxBytes: options.maxBytes, roots: roots, allowedSchemes: options.allowSchemes.map(Set.init),
        transports: Fetcher.builtInTransports + [HTTPTransport(options: http)])
    }
    registry.register(
      "decode", summary: "Decodes JPEG, PNG, GIF, WebP, TIFF or HEIF/AVIF bytes (sniffed, trusted loaders only) into an image.",
      options: DecodeOptions.self
    ) { options, _ in
      ImageDecoder(
        maxPixels: options.maxPixels, autoRotate: options.autoRotate, convertToSRGB: options.convertToSRGB,
        lenient: options.lenient, share: options.share, animated: options.animated == .auto, maxFrames: options.maxFrames)
    }
    registry.register(
      "crop", summary: "Keeps part of the image: a relative or pixel rectangle, a box at a gravity, or a smart crop.",
      options: CropOptions.self
    ) { options, _ in
      Cropper(options.region)
    }
    registry.register(
      "resize", summary: "Scales the image to a box: fit, fill, stretch or center, with a choice of kernel.",
      options: ResizeOptions.self
    ) { options, _ in
      options.resizer
    }
    registry.register(
      "rotate", summary: "Turns the image clockwise by 90, 180 or 270 degrees (after the EXIF orientation).",
      options: RotateOptions.self
    ) { options, _ in
      options.rotator
    }
    registry.register(
      "flip", summary: "Mirrors the image horizontally, vertically, or both.", options: FlipOptions.self
    ) { options, _ in
      options.flipper
    }
    registry.register(
      "grayscale", summary: "Turns the image into shades of grey (its luminance), alpha kept.", options: NoOptions.self
    ) { _, _ in
      Grayscaler()
    }
    registry.register(
      "blur", summary: "Blurs the image with a Gaussian of the given sigma (alpha premultiplied).", options: BlurOptions.self
    ) { options, _ in
      Blurrer(sigma: options.sigma)
    }
    registry.register(
      "sharpen", summary: "Sharpens edges on lightness (an unsharp mask of the given sigma and amount).",
      options: SharpenOptions.self
    ) { options, _ in
      Sharpener(sigma: options.sigma, amount: options.amount)
    }
    registry.register(
      "flatten", summary: "Composes an image with alpha over a solid colour and drops the alpha.", options: FlattenOptions.self
    ) { options, _ in
      options.flattener
    }
    registry.register(
      "extend", summary: "Pads the image with a colour by a number of pixels on each side.", options: ExtendOptions.self
    ) { options, _ in
      options.extender
    }
    registry.register(
      "modulate", summary: "Multiplies brightness and saturation and turns the hue (in LCh).", options: ModulateOptions.self
    ) { options, _ in
      options.modulator
    }
    registry.register(
      "round", summary: "Cuts the corners round (a radius, or a circle), transparent outside.", options: RoundOptions.self
    ) { options, _ in
      options.rounder
    }
    registry.register(
      "trim", summary: "Removes a uniform border: the top-left pixel's colour, or a given one, within a threshold.",
      options: TrimOptions.self
    ) { options, _ in
      options.trimmer
    }
    registry.register(
      "overlay",
      summary: "Composes a watermark image over the image: at a gravity with an offset, or tiled; with opacity and scale.",
      options: OverlayOptions.self
    ) { options, context in
      try options.overlay(roots: [context.allowedRoot].compactMap { $0 })
    }
    registry.register(
      "metadata", summary: "Strips metadata before encode, keeping the ICC profile and/or the EXIF copyright if asked.",
      options: MetadataOptions.self
    ) { options, _ in
      options.keeper
    }
    registry.register(
      "encode", summary: "Encodes the image as JPEG, PNG, WebP, AVIF or GIF (metadata stripped by default).",
      options: EncodeOptions.self
    ) { options, _ in
      options.encoder
    }
    registry.register(
      "write", summary: "Writes the encoded image into the output directory under a templated name, atomically.",
      options: WriteOptions.self
    ) { options, context in
      var writer = Writer(
        directory: options.resolvedDirectory(in: context), template: options.template, overwrite: options.overwrite,
        claims: context.outputClaims)
      writer.capture = context.resultCollector
      return writer
    }
    registry.registerPassThrough(
      "cache",
      summary: "A checkpoint: stores the value flowing through it; later runs of the same source resume after it (memory, disk).",
      options: CacheOptions.self
    ) { options, context in
      CacheFactory(store: try options.makeStore(in: context), maxAge: options.duration, prefix: options.prefix)
    }
    registry.registerPassThrough(
      "notify",
      summary:
        "Announces a named notification (and how each operation ends) to JSON Lines, a webhook, swift-log or swift-metrics.",
      options: NotifyOptions.self
    ) { options, context in
      NotifyFactory(name: options.name, notifier: try options.makeNotifier(in: context), announcesEnd: options.announce)
    }
    registry.register(
      "save", summary: "Writes the fetched bytes unchanged into the output directory ({name}.{ext}), atomically.",
      options: SaveOptions.self
    ) { options, context in
      var saver = BytesWriter(directory: context.outputDirectory ?? ".", template: options.template, claims: context.outputClaims)
      saver.capture = context.resultCollector
      return saver
    }
    return registry
  }
}
