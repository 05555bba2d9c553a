"""fakekube: a fake Kubernetes API server for codepod's tests.

Written in Python with aiohttp, independently of the C client in k8s/, so that
the two cannot share a misunderstanding of the wire protocol. Modules:

  certs   CA, server and client certificates (openssl CLI) and the kubeconfig
  status  Status bodies, byte-for-byte in the real apiserver's shape
  store   pods, resourceVersions, selectors, patches, the lifecycle, watch fan-out
  table   the meta.k8s.io/v1 Table conversion kubectl asks for
  api     HTTP routes, authentication, discovery, watch streaming, control endpoints
  execws  exec over WebSocket (v5/v4.channel.k8s.io) running real local processes
  faults  scripted faults a test can switch on
  namespaces  namespaces and their labels
  admission   field validation (Strict/Warn) and Pod Security admission
  rbac    the chart's Role enforced (serve --rbac)
"""
