"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) over the cluster's authorizer
(:mod:`kcodec.broker.authorizer`), as Kafka's broker answers them:

* no authorizer: SECURITY_DISABLED ("No Authorizer is configured on the broker");
* DescribeAcls needs DESCRIBE on the cluster, the other two ALTER on the cluster, else
  CLUSTER_AUTHORIZATION_FAILED for the whole request;
* a creation or filter Kafka refuses (unknown or ANY types in an ACL, a CLUSTER ACL not
  named kafka-cluster, an empty name, a principal that is not Type:name) gets
  INVALID_REQUEST with the reason, the others are applied;
* a CreateAcls of more than 10,000 creations, a DeleteAcls that would remove more than
  10,000 ACLs, fail whole with POLICY_VIOLATION (nothing changes), as Kafka's controller
  refuses an operation of more than 10,000 records;
* an ACL change is on disk (with ``--data-dir``) before it is answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcodec.broker.apis.authz import Op, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.apis.topics import MAX_RECORDS_PER_REQUEST, TOO_LARGE
from kcodec.protocol import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    ErrorCode,
)
from kcodec.protocol.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
            host: str | None, operation: int, permission: int) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.of(resource_type), name, PatternType.of(pattern_type),
                            principal, host, AclOperation.of(operation),
                            AclPermissionType.of(permission))


@api(DescribeAclsRequest, 0, 3)
def describe_acls(node: Node, req: Incoming[DescribeAclsRequest]) -> Answer[DescribeAclsResponse]:
    D = DescribeAclsResponse
    auth = node.cluster.authorizer
    if auth is None:
        return D(error_code=E.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
    if not cluster_allowed(node, req, Op.DESCRIBE):
        return D(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                 error_message="DescribeAcls needs DESCRIBE on the cluster")
    b = req.body
    flt = _filter(b.resource_type_filter, b.resource_name_filter, b.pattern_type_filter,
                  b.principal_filter, b.host_filter, b.operation, b.permission_type)
    why = flt.problem()
    if why is not None:
        return D(error_code=E.INVALID_REQUEST, error_message=why)
    groups: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in auth.acls(flt):
        if req.api_version == 0 and acl.pattern_type != PatternType.LITERAL:
            continue      # v0 cannot carry a pattern type: only literal ACLs
        groups.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    return D(error_code=0, error_message=None, resources=[
        D.DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=[
            D.AclDescription(principal=a.principal, host=a.host, operation=a.operation,
                             permission_type=a.permission) for a in acls])
        for (rt, name, pt), acls in groups.items()])


@api(CreateAclsRequest, 0, 3)
def create_acls(node: Node, req: Incoming[CreateAclsRequest]) -> Answer[CreateAclsResponse]:
    C = CreateAclsResponse
    creations = req.body.creations
    auth = node.cluster.authorizer
    if auth is None:
        return C(results=[C.AclCreationResult(error_code=E.SECURITY_DISABLED,
                                              error_message=NO_AUTHORIZER) for _ in creations])
    if not cluster_allowed(node, req, Op.ALTER):
        return C(results=[C.AclCreationResult(
            error_code=E.CLUSTER_AUTHORIZATION_FAILED,
            error_message="CreateAcls needs ALTER on the cluster") for _ in creations])
    if len(creations) > MAX_RECORDS_PER_REQUEST:
        # Kafka's controller makes at most 10,000 records an operation: the whole request
        # fails, nothing is created
        return C(results=[C.AclCreationResult(error_code=E.POLICY_VIOLATION,
                                              error_message=TOO_LARGE) for _ in creations])
    bindings = [AclBinding(ResourceType.of(c.resource_type), c.resource_name,
                           PatternType.of(c.resource_pattern_type), c.principal, c.host,
                           AclOperation.of(c.operation), AclPermissionType.of(c.permission_type))
                for c in creations]
    return C(results=[C.AclCreationResult(error_code=E.INVALID_REQUEST if why else 0,
                                          error_message=why)
                      for why in auth.create(bindings)])


@api(DeleteAclsRequest, 0, 3)
def delete_acls(node: Node, req: Incoming[DeleteAclsRequest]) -> Answer[DeleteAclsResponse]:
    X = DeleteAclsResponse
    filters = req.body.filters
    auth = node.cluster.authorizer
    if auth is None:
        return X(filter_results=[X.DeleteAclsFilterResult(error_code=E.SECURITY_DISABLED,
                                                          error_message=NO_AUTHORIZER)
                                 for _ in filters])
    if not cluster_allowed(node, req, Op.ALTER):
        return X(filter_results=[X.DeleteAclsFilterResult(
            error_code=E.CLUSTER_AUTHORIZATION_FAILED,
            error_message="DeleteAcls needs ALTER on the cluster") for _ in filters])
    out = []
    results = auth.delete((_filter(f.resource_type_filter, f.resource_name_filter,
                                   f.pattern_type_filter, f.principal_filter, f.host_filter,
                                   f.operation, f.permission_type) for f in filters),
                          max_removed=MAX_RECORDS_PER_REQUEST)
    if results is None:
        return X(filter_results=[X.DeleteAclsFilterResult(error_code=E.POLICY_VIOLATION,
                                                          error_message=TOO_LARGE)
                                 for _ in filters])
    for result in results:
        if isinstance(result, str):
            out.append(X.DeleteAclsFilterResult(error_code=E.INVALID_REQUEST, error_message=result))
            continue
        out.append(X.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            X.DeleteAclsMatchingAcl(error_code=0, error_message=None,
                                    resource_type=a.resource_type, resource_name=a.resource_name,
                                    pattern_type=a.pattern_type, principal=a.principal,
                                    host=a.host, operation=a.operation,
                                    permission_type=a.permission)
            for a in result]))
    return X(filter_results=out)
