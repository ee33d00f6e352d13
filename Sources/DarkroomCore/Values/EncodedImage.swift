/// An encoded image: the bytes of a file in a known format, with its dimensions.
///
/// ```swift
/// let encoded: EncodedImage = try await pipeline.run(ImageSource("a.jpg")).value
/// try encoded.bytes.data.write(to: URL(fileURLWithPath: "a-small.\(encoded.format.fileExtension)"))
/// ```
public struct EncodedImage: Sendable, PipelineValue, SummarizableOutput {
  public static let valueDescription = "an encoded image"

  public var source: ImageSource
  public var bytes: ImageBytes
  public var format: ImageFormat
  public var width: Int
  public var height: Int
  /// True when the image was decoded leniently from damaged data and is incomplete.
  public var partial: Bool

  public init(source: ImageSource, bytes: ImageBytes, format: ImageFormat, width: Int, height: Int, partial: Bool = false) {
    self.source = source
    self.bytes = bytes
    self.format = format
    self.width = width
    self.height = height
    self.partial = partial
  }

  public var outputSummary: OutputSummary {
    OutputSummary(width: width, height: height, format: format.rawValue, bytes: bytes.count, partial: partial)
  }
}

/// An encoded image that was written to a file.
///
/// ```swift
/// let publish = Pipeline(name: "publish") { Fetcher(); ImageDecoder(); ImageEncoder(.webp()); Writer(directory: "out") }
/// let written: WrittenImage = try await publish.process(ImageSource("a.jpg"))
/// print(written.path, written.image.width, written.image.format)   // out/a.webp 1200 webp
/// ```
public struct WrittenImage: Sendable, PipelineValue, SummarizableOutput {
  public static let valueDescription = "a written file"

  /// The image that was written.
  public var image: EncodedImage
  /// The path of the file.
  public var path: String

  public init(image: EncodedImage, path: String) {
    self.image = image
    self.path = path
  }

  public var outputSummary: OutputSummary {
    var summary = image.outputSummary
    summary.path = path
    return summary
  }
}
