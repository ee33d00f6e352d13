import CVips
import CVipsShim
import DarkroomCore

extension ImageDecoder {
  /// How strict loaders are by default: fail on truncated or damaged pixel data, tolerate
  /// harmless warnings about metadata.
  static let strictFailOn = VIPS_FAIL_ON_ERROR

  /// The strict setting for one format. GIF's loader reports damaged frame data only as a
  /// warning, so strict GIF decoding fails on warnings (measured on the shared corpus; JPEG must
  /// not: harmless "extraneous bytes" warnings are common in real photos).
  static func strictFailOn(for format: ImageFormat) -> VipsFailOn {
    format == .gif ? VIPS_FAIL_ON_WARNING : strictFailOn
  }

  /// The trusted format of the bytes, or `unsupportedFormat` naming what was found.
  static func trustedFormat(of input: FetchedData) throws(PipelineError) -> ImageFormat {
    let shown = input.source.description
    guard input.bytes.count > 0 else {
      throw PipelineError(.corruptImage, "the source is empty (0 bytes): there is no image to decode", source: shown)
    }
    let trusted = ImageFormat.trustedDecodable.map(\.description).joined(separator: ", ")
    guard let format = ImageFormat.sniff(input.bytes.prefix(512)) else {
      throw PipelineError(
        .unsupportedFormat, "the bytes are not an image of a supported format (supported: \(trusted))", source: shown)
    }
    guard ImageFormat.trustedDecodable.contains(format) else {
      throw PipelineError(
        .unsupportedFormat,
        "\(format) images are not accepted: their decoders are not trusted with untrusted input (supported: \(trusted))",
        source: shown)
    }
    return format
  }

  /// Decodes a tiled TIFF with separate planes (which libvips 8.14 cannot read) through libtiff's
  /// RGBA interface into memory.
  static func loadPlanarTIFF(_ input: FetchedData, maxPixels: Int) throws(PipelineError) -> VipsImage {
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    guard dr_tiff_load_rgba(input.bytes.baseAddress, input.bytes.count, maxPixels, &out) == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(
        .corruptImage, "the TIFF data is damaged: \(cause.text)", source: input.source.description, cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [])
  }

  /// Whether a large local file of `format` is decoded from the file itself rather than read into
  /// memory first: only formats whose libvips loaders read through `vips_source_read` and fail
  /// cleanly on a short read (JPEG, PNG, TIFF). The WebP and GIF loaders map the whole file
  /// (`vips_source_map`), and libheif asserts (SIGABRT) when the file becomes shorter than its
  /// header said, so those are read into memory, bounded by `maxBytes`.
  static func decodesFromFile(_ format: ImageFormat) -> Bool {
    switch format {
    case .jpeg, .png, .tiff: true
    default: false
    }
  }

  /// Runs the format's own loader on the bytes (or, for a large local JPEG, PNG or TIFF, on the
  /// file itself through a source that cannot map it); the image keeps the bytes alive.
  package static func load(
    _ format: ImageFormat, from bytes: ImageBytes, failOn: VipsFailOn? = nil, source: ImageSource, shrink: Int = 1,
    scale: Double = 1,
    thumbnail: Bool = false, sequential: Bool = true
  ) throws(PipelineError) -> VipsImage {
    guard let code = format.shimFormat else {
      throw PipelineError(.unsupportedFormat, "\(format) images are not accepted", source: source.description)
    }
    // libvips starts itself on first use when nobody has: with every module, which dr_init avoids.
    try Vips.initialize()
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    Vips.takeWarning()  // forget warnings of earlier work on this thread
    let failOn = failOn ?? strictFailOn(for: format)
    let status: Int32
    if let descriptor = bytes.streamingDescriptor, Self.decodesFromFile(format) {
      // A large local file: the loader reads it in pieces through a custom source (never a path
      // or a mappable descriptor: a mapped file truncated by someone else raises SIGBUS).
      status = dr_load_descriptor(
        code, descriptor, bytes.count, Int32(shrink), scale, thumbnail ? 1 : 0, failOn, sequential ? 1 : 0, &out)
    } else {
      // In memory, or read into memory now: a snapshot that nobody can change during the decode.
      status = dr_load_buffer(
        code, bytes.baseAddress, bytes.count, Int32(shrink), scale, thumbnail ? 1 : 0, failOn, sequential ? 1 : 0, &out)
    }
    guard status == 0, let out else {
      let cause = Vips.captureError()
      if cause.text.contains("Unsupported JPEG process") {
        throw PipelineError(
          .unsupportedFormat,
          "this JPEG uses a coding process the decoder does not support (lossless or hierarchical JPEG): \(cause.text)",
          source: source.description, cause: cause)
      }
      if cause.text.contains("Security limit exceeded") || cause.text.contains("exceeds the maximum image size") {
        throw PipelineError(
          .imageTooLarge, "the \(format) image is larger than its decoder accepts: \(cause.text)", source: source.description,
          cause: cause)
      }
      throw PipelineError(
        .corruptImage, "the \(format) data is damaged or not a valid \(format) image: \(cause.text)", source: source.description,
        cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [bytes])
  }
}

extension ImageFormat {
  /// The shim's code for a trusted format's loader, or `nil` for a format that is not decoded.
  var shimFormat: DrFormat? {
    switch self {
    case .jpeg: DR_FORMAT_JPEG
    case .png: DR_FORMAT_PNG
    case .gif: DR_FORMAT_GIF
    case .webp: DR_FORMAT_WEBP
    case .tiff: DR_FORMAT_TIFF
    case .heif, .avif: DR_FORMAT_HEIF
    default: nil
    }
  }
}
