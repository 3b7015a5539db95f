/// Fenec's Dart client: for now the HTTP transport tools/sdkgen generates
/// from openapi.yaml.
library;

export 'src/transport.g.dart';
