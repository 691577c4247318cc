package cm

import "fmt"

// RejectReason is a REJ's Reason (IBTA Vol 1 §12.6, Table 108 "REJ Message
// Contents", reason codes; Linux enum ib_cm_rej_reason). The names are the spec's.
type RejectReason uint16

// Rejection reasons.
const (
	RejNoQPAvailable                  RejectReason = 1  // No QP available
	RejNoEECAvailable                 RejectReason = 2  // No EEC available
	RejNoResourcesAvailable           RejectReason = 3  // No resources available
	RejTimeout                        RejectReason = 4  // Timeout
	RejUnsupportedRequest             RejectReason = 5  // Unsupported request
	RejInvalidCommunicationID         RejectReason = 6  // Invalid Communication ID
	RejInvalidCommunicationInstance   RejectReason = 7  // Invalid Communication Instance
	RejInvalidServiceID               RejectReason = 8  // Invalid Service ID
	RejInvalidTransportServiceType    RejectReason = 9  // Invalid Transport Service Type
	RejStaleConnection                RejectReason = 10 // Stale connection
	RejRDCDoesNotExist                RejectReason = 11 // RDC does not exist
	RejPrimaryRemotePortGIDRejected   RejectReason = 12 // Primary Remote Port GID rejected (ARI: an acceptable GID)
	RejPrimaryRemotePortLIDRejected   RejectReason = 13 // Primary Remote Port LID rejected
	RejInvalidPrimarySL               RejectReason = 14 // Invalid Primary SL
	RejInvalidPrimaryTrafficClass     RejectReason = 15 // Invalid Primary Traffic Class
	RejInvalidPrimaryHopLimit         RejectReason = 16 // Invalid Primary Hop Limit
	RejInvalidPrimaryPacketRate       RejectReason = 17 // Invalid Primary Packet Rate
	RejAlternateRemotePortGIDRejected RejectReason = 18 // Alternate Remote Port GID rejected
	RejAlternateRemotePortLIDRejected RejectReason = 19 // Alternate Remote Port LID rejected
	RejInvalidAlternateSL             RejectReason = 20 // Invalid Alternate SL
	RejInvalidAlternateTrafficClass   RejectReason = 21 // Invalid Alternate Traffic Class
	RejInvalidAlternateHopLimit       RejectReason = 22 // Invalid Alternate Hop Limit
	RejInvalidAlternatePacketRate     RejectReason = 23 // Invalid Alternate Packet Rate
	RejPortAndCMRedirection           RejectReason = 24 // Port and CM Redirection
	RejPortRedirection                RejectReason = 25 // Port Redirection
	RejInvalidPathMTU                 RejectReason = 26 // Invalid Path MTU (ARI: an acceptable MTU)
	RejInsufficientResponderResources RejectReason = 27 // Insufficient Responder Resources
	RejConsumerReject                 RejectReason = 28 // Consumer Reject (rdma_reject; ARI: consumer's)
	RejRNRRetryCountReject            RejectReason = 29 // RNR Retry Count Reject
	RejDuplicateLocalCommunicationID  RejectReason = 30 // Duplicate Local Communication ID
	RejUnsupportedClassVersion        RejectReason = 31 // Unsupported Class Version (ARI: the highest supported)
	RejInvalidPrimaryFlowLabel        RejectReason = 32 // Invalid Primary Flow Label
	RejInvalidAlternateFlowLabel      RejectReason = 33 // Invalid Alternate Flow Label
	RejVendorOptionNotSupported       RejectReason = 35 // Vendor option not supported (ECE, IBA comment 9434)
)

var rejectNames = [...]string{
	RejNoQPAvailable:                  "No QP available",
	RejNoEECAvailable:                 "No EEC available",
	RejNoResourcesAvailable:           "No resources available",
	RejTimeout:                        "Timeout",
	RejUnsupportedRequest:             "Unsupported request",
	RejInvalidCommunicationID:         "Invalid Communication ID",
	RejInvalidCommunicationInstance:   "Invalid Communication Instance",
	RejInvalidServiceID:               "Invalid Service ID",
	RejInvalidTransportServiceType:    "Invalid Transport Service Type",
	RejStaleConnection:                "Stale connection",
	RejRDCDoesNotExist:                "RDC does not exist",
	RejPrimaryRemotePortGIDRejected:   "Primary Remote Port GID rejected",
	RejPrimaryRemotePortLIDRejected:   "Primary Remote Port LID rejected",
	RejInvalidPrimarySL:               "Invalid Primary SL",
	RejInvalidPrimaryTrafficClass:     "Invalid Primary Traffic Class",
	RejInvalidPrimaryHopLimit:         "Invalid Primary Hop Limit",
	RejInvalidPrimaryPacketRate:       "Invalid Primary Packet Rate",
	RejAlternateRemotePortGIDRejected: "Alternate Remote Port GID rejected",
	RejAlternateRemotePortLIDRejected: "Alternate Remote Port LID rejected",
	RejInvalidAlternateSL:             "Invalid Alternate SL",
	RejInvalidAlternateTrafficClass:   "Invalid Alternate Traffic Class",
	RejInvalidAlternateHopLimit:       "Invalid Alternate Hop Limit",
	RejInvalidAlternatePacketRate:     "Invalid Alternate Packet Rate",
	RejPortAndCMRedirection:           "Port and CM Redirection",
	RejPortRedirection:                "Port Redirection",
	RejInvalidPathMTU:                 "Invalid Path MTU",
	RejInsufficientResponderResources: "Insufficient Responder Resources",
	RejConsumerReject:                 "Consumer Reject",
	RejRNRRetryCountReject:            "RNR Retry Count Reject",
	RejDuplicateLocalCommunicationID:  "Duplicate Local Communication ID",
	RejUnsupportedClassVersion:        "Unsupported Class Version",
	RejInvalidPrimaryFlowLabel:        "Invalid Primary Flow Label",
	RejInvalidAlternateFlowLabel:      "Invalid Alternate Flow Label",
	RejVendorOptionNotSupported:       "Vendor option not supported",
}

func (r RejectReason) String() string {
	if int(r) < len(rejectNames) && rejectNames[r] != "" {
		return rejectNames[r]
	}
	return fmt.Sprintf("RejectReason(%d)", uint16(r))
}
