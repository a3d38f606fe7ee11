// Package tenancy keeps a Redis ACL user per namespace with policies, and its credentials
// Secret there: created with the namespace's first policy, its password rotated on request
// or by age (the previous one accepted for a grace period), repaired on every node, and
// removed a grace period after the namespace's last policy.
package tenancy
